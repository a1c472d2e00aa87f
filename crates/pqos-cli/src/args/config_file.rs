//! `-f FILE` (`--config-file`): pqos's configuration files (pqos/main.c `parse_config_file`).
//!
//! A file holds one command per line, `KEY: VALUE`, with `#` comment lines and blank lines
//! skipped; keys are matched case-insensitively as prefixes (`show-alloc:`, `alloc-class-set:
//! llc:1=0xf`, ...), the value is what follows the colon and any spaces. pqos runs each
//! command where `-f` stands on the command line, so options before `-f` are overridden by
//! the file and options after it override the file; `-e`/`-a`/`-m` items accumulate in that
//! order. This module does exactly that: it replaces `-f FILE` in the argument list with the
//! options the file's lines stand for, and clap parses the result.
//!
//! Example (in pqos's own configs: `alloc-assoc-set: llc:0=0-2`):
//! ```text
//! # two classes for the seed paper's DPDK pipeline and its noisy neighbour
//! alloc-class-set: llc:1=0xffe00;llc:2=0x00003
//! ALLOC-ASSOC-SET: llc:1=2-7;llc:2=8-10
//! ```

use std::ffi::OsString;
use std::path::Path;

use clap::Command;

use super::safe_open::SafeOpenError;

/// What a configuration key becomes on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Becomes {
    /// A flag; the line's value is ignored (as pqos's `selfn_*` ignore it).
    Flag(&'static str),
    /// An option taking the line's value.
    Value(&'static str),
    /// A fixed option and value.
    Fixed(&'static str),
}

/// pqos's `optab[]` of `parse_config_file`, in its order (the first prefix that matches
/// wins).
const KEYS: [(&str, Becomes); 21] = [
    ("show-alloc:", Becomes::Flag("--show")),
    ("display:", Becomes::Flag("--display")),
    ("display-verbose:", Becomes::Flag("--display-verbose")),
    ("log-file:", Becomes::Value("--log-file")),
    ("verbose-mode:", Becomes::Flag("--verbose")),
    ("super-verbose-mode:", Becomes::Flag("--super-verbose")),
    ("alloc-class-set:", Becomes::Value("--alloc-class")),
    ("alloc-assoc-set:", Becomes::Value("--alloc-assoc")),
    ("alloc-class-select:", Becomes::Value("--profile-set")),
    ("monitor-pids:", Becomes::Value("--mon-pid")),
    ("monitor-cores:", Becomes::Value("--mon-core")),
    ("monitor-devs:", Becomes::Value("--mon-dev")),
    ("monitor-channels:", Becomes::Value("--mon-channel")),
    ("monitor-time:", Becomes::Value("--mon-time")),
    ("monitor-interval:", Becomes::Value("--mon-interval")),
    ("monitor-file:", Becomes::Value("--mon-file")),
    ("monitor-file-type:", Becomes::Value("--mon-file-type")),
    ("monitor-top-like:", Becomes::Flag("--mon-top")),
    ("reset-cat:", Becomes::Value("--alloc-reset")),
    ("iface-os:", Becomes::Fixed("--iface=os")),
    ("iface:", Becomes::Value("--iface")),
];

fn parse_error(arg: &str, note: &str) -> String {
    format!("Error parsing \"{arg}\" command line argument. {note}")
}

/// The options the lines of a configuration file stand for, in order.
///
/// # Errors
/// pqos's `Error parsing "LINE" command line argument. Unrecognized configuration file
/// command`, naming the line and its number.
pub fn options_of(text: &str, file: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Keys are ASCII: compare bytes, so a line with other characters never slices one.
        let found = KEYS.iter().find(|(key, _)| {
            line.as_bytes()
                .get(..key.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(key.as_bytes()))
        });
        let Some((key, becomes)) = found else {
            return Err(format!(
                "{} ({file} line {}; keys are {})",
                parse_error(line, "Unrecognized configuration file command"),
                n + 1,
                KEYS.map(|(k, _)| k).join(" ")
            ));
        };
        // The key matched ASCII bytes, so its end is a character boundary.
        let value = line.get(key.len()..).unwrap_or_default().trim_start();
        match becomes {
            Becomes::Flag(option) | Becomes::Fixed(option) => out.push((*option).to_owned()),
            Becomes::Value(option) => out.push(format!("{option}={value}")),
        }
    }
    Ok(out)
}

/// Which options take a value, from the clap definition (so the scan agrees with clap).
struct Shape {
    /// (short, long, takes a value, the value is optional)
    args: Vec<(Option<char>, Option<String>, bool, bool)>,
}

impl Shape {
    fn of(cmd: &mut Command) -> Self {
        cmd.build();
        let args = cmd
            .get_arguments()
            .map(|a| {
                let range = a.get_num_args().unwrap_or_default();
                let takes = a.get_action().takes_values() && range.max_values() > 0;
                (
                    a.get_short(),
                    a.get_long().map(str::to_owned),
                    takes,
                    range.min_values() == 0,
                )
            })
            .collect();
        Self { args }
    }

    fn short(&self, c: char) -> Option<(bool, bool)> {
        self.args
            .iter()
            .find(|a| a.0 == Some(c))
            .map(|a| (a.2, a.3))
    }

    fn long(&self, name: &str) -> Option<(bool, bool)> {
        self.args
            .iter()
            .find(|a| a.1.as_deref() == Some(name))
            .map(|a| (a.2, a.3))
    }
}

/// Where `-f FILE` stands in an argument list: the argument indices it spans and the file.
#[derive(Debug, PartialEq, Eq)]
struct ConfigArg {
    first: usize,
    last: usize,
    file: OsString,
    /// Short flags bundled before `f` in the same argument (`-s` of `-sf FILE`), kept.
    flags_before: Option<OsString>,
}

fn optional_value_follows(argv: &[OsString], i: usize) -> bool {
    argv.get(i + 1)
        .is_some_and(|next| !next.to_string_lossy().starts_with('-'))
}

/// Finds every `-f FILE` / `-fFILE` / `--config-file FILE` / `--config-file=FILE`,
/// skipping the values of other options (`-e -f` would make `-f` a value), as getopt does.
fn find_config_args(argv: &[OsString], shape: &Shape) -> Vec<ConfigArg> {
    let mut found = Vec::new();
    let mut i = 1;
    while i < argv.len() {
        let text = argv[i].to_string_lossy().into_owned();
        if text == "--" {
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            if name == "config-file" {
                if let Some(v) = inline {
                    found.push(ConfigArg {
                        first: i,
                        last: i,
                        file: v.into(),
                        flags_before: None,
                    });
                } else {
                    if let Some(v) = argv.get(i + 1) {
                        found.push(ConfigArg {
                            first: i,
                            last: i + 1,
                            file: v.clone(),
                            flags_before: None,
                        });
                    }
                    i += 1;
                }
            } else if inline.is_none()
                && let Some((true, optional)) = shape.long(name)
                && (!optional || optional_value_follows(argv, i))
            {
                i += 1;
            }
        } else if let Some(cluster) = text.strip_prefix('-') {
            for (pos, c) in cluster.char_indices() {
                let rest = &cluster[pos + c.len_utf8()..];
                if c == 'f' {
                    let flags_before = (pos > 0).then(|| format!("-{}", &cluster[..pos]).into());
                    if rest.is_empty() {
                        if let Some(v) = argv.get(i + 1) {
                            found.push(ConfigArg {
                                first: i,
                                last: i + 1,
                                file: v.clone(),
                                flags_before,
                            });
                        }
                        i += 1;
                    } else {
                        found.push(ConfigArg {
                            first: i,
                            last: i,
                            file: rest.trim_start_matches('=').into(),
                            flags_before,
                        });
                    }
                    break;
                }
                if let Some((true, optional)) = shape.short(c) {
                    if rest.is_empty() && (!optional || optional_value_follows(argv, i)) {
                        i += 1;
                    }
                    break;
                }
            }
        }
        i += 1;
    }
    found
}

/// The largest configuration file read, in bytes (1 MiB; pqos's own are a few hundred bytes).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The text of the configuration file at `path`: a regular file, not a symlink (pqos's
/// `safe_fopen`), at most [`MAX_FILE_BYTES`], UTF-8; read with the one bounded reader
/// (`rdt_host::file`), so a FIFO or a device is refused without blocking or reading.
fn read(path: &Path) -> Result<String, String> {
    use rdt_pqos::file::{ReadError, read_regular};
    let name = path.display();
    let cannot_open = |e: &dyn std::fmt::Display| {
        format!(
            "{} ({name}: {e})",
            parse_error(&name.to_string(), "cannot open configuration file!")
        )
    };
    // The lstat gives pqos's message for a link; O_NOFOLLOW refuses one swapped in since.
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(SafeOpenError::Symlink(path.to_owned()).to_string());
    }
    let bytes = read_regular(path, MAX_FILE_BYTES, true).map_err(|e| match e {
        ReadError::Open(io) if io.raw_os_error() == Some(libc::ELOOP) => {
            SafeOpenError::Symlink(path.to_owned()).to_string()
        }
        ReadError::Open(io) => cannot_open(&io),
        e @ (ReadError::NotRegular(_) | ReadError::TooLarge { .. }) => cannot_open(&e),
        e => format!(
            "reading the configuration file {name}: {}",
            rdt_pqos::error_chain(&e)
        ),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // The valid prefix gives the line (the invalid byte cannot be a newline).
        let line = std::str::from_utf8(&bytes[..offset]).map_or(1, |p| p.matches('\n').count() + 1);
        format!(
            "{name} line {line}: not UTF-8 (invalid byte {:#04x} at byte offset {offset})",
            bytes[offset]
        )
    })
}

/// Replaces `-f FILE` in `argv` with the options of the file, as pqos runs them in place.
///
/// # Errors
/// pqos's `Only one config file argument is accepted!`, a symbolic link (`File %s is a
/// symlink`), a file that cannot be read, is not a regular file or is larger than
/// [`MAX_FILE_BYTES`] (`Error parsing "FILE" command line argument. cannot open
/// configuration file!`, then why), text that is not UTF-8 (naming the line), or a line
/// [`options_of`] refuses.
pub fn expand(argv: Vec<OsString>, cmd: &mut Command) -> Result<Vec<OsString>, String> {
    let shape = Shape::of(cmd);
    let found = find_config_args(&argv, &shape);
    let Some(at) = found.first() else {
        return Ok(argv);
    };
    if found.len() > 1 {
        return Err("Only one config file argument is accepted!".into());
    }
    let path = Path::new(&at.file);
    let text = read(path)?;
    let options = options_of(&text, &path.display().to_string())?;
    let mut out: Vec<OsString> = argv[..at.first].to_vec();
    out.extend(at.flags_before.clone());
    out.extend(options.into_iter().map(OsString::from));
    out.extend(argv[at.last + 1..].iter().cloned());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::args::Args;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn strs(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn lines_become_options_with_comments_blank_lines_and_any_case() {
        // arrange: our own example, in the style of pqos/configs/*.cfg
        let text = "# comment\n\n   alloc-class-set:   llc:1=0xffe00;llc:2=0x00003  \n\
                    ALLOC-ASSOC-SET: llc:1=2-7\nshow-alloc: yes\nreset-cat:\n\
                    Monitor-Time: 10\nmonitor-cores: all:[0-3]\niface-os:\n";
        // act
        let opts = options_of(text, "x.cfg").unwrap();
        // assert
        assert_eq!(
            opts,
            [
                "--alloc-class=llc:1=0xffe00;llc:2=0x00003",
                "--alloc-assoc=llc:1=2-7",
                "--show",
                "--alloc-reset=",
                "--mon-time=10",
                "--mon-core=all:[0-3]",
                "--iface=os",
            ]
        );
    }

    #[test]
    fn unknown_command_gets_pqos_message_naming_line() {
        let e = options_of("show-alloc:\nfrobnicate: 1\n", "my.cfg").unwrap_err();
        assert!(
            e.starts_with(
                "Error parsing \"frobnicate: 1\" command line argument. Unrecognized configuration file command"
            ),
            "{e}"
        );
        assert!(e.contains("my.cfg line 2"), "{e}");
        // a key needs its colon
        assert!(options_of("show-alloc\n", "c").is_err());
        // the I/O RDT monitoring keys are their options
        let o = options_of(
            "monitor-devs: all:0000:00:04.0\nmonitor-channels: llc:0x10100\n",
            "c",
        )
        .unwrap();
        assert_eq!(
            o,
            ["--mon-dev=all:0000:00:04.0", "--mon-channel=llc:0x10100"],
            "{o:?}"
        );
    }

    #[test]
    fn non_ascii_lines_are_errors_naming_the_line_not_panics() {
        // "éééééé" is 12 bytes: slicing it at the 11 bytes of `show-alloc:` cut a character.
        for (text, line) in [
            ("show-alloc:\néééééé\n", 2),
            ("ÄLLOC-CLASS-SET: llc:1=0xf\n", 1),
            ("alloc-class-set: llc:1=0xf\nmonitor-time: ∞\n", 0),
        ] {
            let r = options_of(text, "u.cfg");
            if line == 0 {
                // a non-ASCII value is the value's parser's business
                assert_eq!(r.unwrap()[1], "--mon-time=∞");
                continue;
            }
            let e = r.unwrap_err();
            assert!(e.contains("Unrecognized configuration file command"), "{e}");
            assert!(e.contains(&format!("u.cfg line {line}")), "{e}");
        }
    }

    #[test]
    fn invalid_utf8_fifos_and_huge_files_are_errors_naming_the_file() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.cfg");
        std::fs::write(&bad, b"show-alloc:\nalloc-class-set: llc:1=0x\xff\n").unwrap();
        let fifo = dir.path().join("fifo.cfg");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let huge = dir.path().join("huge.cfg");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let run = |p: &Path| {
            expand(
                os(&["pqos", "-f", p.to_str().unwrap()]),
                &mut Args::command(),
            )
        };
        let start = std::time::Instant::now();
        // act
        let e_bad = run(&bad).unwrap_err();
        let e_fifo = run(&fifo).unwrap_err();
        let e_huge = run(&huge).unwrap_err();
        let e_zero = run(Path::new("/dev/zero")).unwrap_err();
        // assert
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(
            e_bad,
            format!(
                "{} line 2: not UTF-8 (invalid byte 0xff at byte offset 37)",
                bad.display()
            )
        );
        assert!(
            e_fifo.contains(&format!("{}: a FIFO", fifo.display())),
            "{e_fifo}"
        );
        assert!(e_huge.contains("more than the 1048576 bytes"), "{e_huge}");
        assert!(e_huge.contains("huge.cfg"), "{e_huge}");
        assert!(e_zero.contains("/dev/zero: a character device"), "{e_zero}");
    }

    #[test]
    fn config_option_is_found_past_other_options_values() {
        let mut cmd = Args::command();
        let shape = Shape::of(&mut cmd);
        let find = |v: &[&str]| find_config_args(&os(v), &shape);
        assert_eq!(
            find(&["pqos", "-s", "-f", "a.cfg"]),
            [ConfigArg {
                first: 2,
                last: 3,
                file: "a.cfg".into(),
                flags_before: None
            }]
        );
        assert_eq!(find(&["pqos", "-fa.cfg"])[0].file, "a.cfg");
        let sf = &find(&["pqos", "-sf", "a.cfg"])[0];
        assert_eq!((sf.first, sf.flags_before.clone()), (1, Some("-s".into())));
        assert_eq!(find(&["pqos", "-vfa.cfg"])[0].file, "a.cfg");
        assert_eq!(find(&["pqos", "--config-file=a.cfg"])[0].file, "a.cfg");
        assert_eq!(find(&["pqos", "--config-file", "a.cfg"])[0].last, 2);
        // `-f` as the value of -e or -t is not a config file
        assert!(find(&["pqos", "-e", "-f", "-t", "-f"]).is_empty());
        assert!(find(&["pqos", "-ef"]).is_empty());
        // -R takes an optional value: `-R -f x` still finds -f, `-R l3cdp-on` skips the value
        assert_eq!(find(&["pqos", "-R", "-f", "x"])[0].file, "x");
        assert!(find(&["pqos", "-R", "f"]).is_empty());
        assert_eq!(find(&["pqos", "-f", "a", "-f", "b"]).len(), 2);
    }

    #[test]
    fn expand_splices_the_file_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("a.cfg");
        std::fs::write(&cfg, "monitor-time: 5\nalloc-class-set: llc:1=0xf\n").unwrap();
        let cfg_s = cfg.to_str().unwrap();
        let out = expand(
            os(&["pqos", "-t", "1", "-f", cfg_s, "-t", "9"]),
            &mut Args::command(),
        )
        .unwrap();
        assert_eq!(
            strs(&out),
            [
                "pqos",
                "-t",
                "1",
                "--mon-time=5",
                "--alloc-class=llc:1=0xf",
                "-t",
                "9"
            ]
        );
        let out = expand(os(&["pqos", "-sf", cfg_s]), &mut Args::command()).unwrap();
        assert_eq!(strs(&out)[..3], ["pqos", "-s", "--mon-time=5"]);
        let e = expand(
            os(&["pqos", "-f", cfg_s, "-f", cfg_s]),
            &mut Args::command(),
        )
        .unwrap_err();
        assert_eq!(e, "Only one config file argument is accepted!");
        let e = expand(
            os(&["pqos", "-f", "/nonexistent.cfg"]),
            &mut Args::command(),
        )
        .unwrap_err();
        assert!(
            e.starts_with(
                "Error parsing \"/nonexistent.cfg\" command line argument. cannot open configuration file!"
            ),
            "{e}"
        );
        let link = dir.path().join("link.cfg");
        std::os::unix::fs::symlink(&cfg, &link).unwrap();
        let e = expand(
            os(&["pqos", "-f", link.to_str().unwrap()]),
            &mut Args::command(),
        )
        .unwrap_err();
        assert!(e.contains("is a symlink"), "{e}");
    }

    /// Any configuration file text gives options or an error naming a line of it; any
    /// bytes on disk likewise (invalid UTF-8 names its line), never a panic.
    #[test]
    fn fuzz_config_files_never_panic_and_errors_name_the_line() {
        use proptest::prelude::*;
        use rdt_pqos::fake::fuzz::{fuzz, text};
        const WORDS: &[&str] = &[
            "show-alloc:",
            "alloc-class-set:",
            "ALLOC-ASSOC-SET:",
            "monitor-devs:",
            "iface-os:",
            "monitor-time:",
            "#",
            "\n",
            " ",
            "llc:1=0xf",
            "é",
            "ß",
            "\u{feff}",
            ":",
        ];
        fuzz("-f options_of", text(WORDS, 20), |t| {
            if let Err(e) = options_of(&t, "f.cfg") {
                let line: usize = e
                    .rsplit("f.cfg line ")
                    .next()
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no line number in {e}"));
                let text = t.lines().nth(line - 1).unwrap_or_default().trim();
                prop_assert!(e.contains(text), "{e} for {t:?}");
            }
            Ok(())
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.cfg");
        let bytes = proptest::collection::vec(
            prop_oneof![
                proptest::sample::select(WORDS).prop_map(|w| w.as_bytes().to_vec()),
                any::<u8>().prop_map(|b| vec![b]),
            ],
            0..20,
        )
        .prop_map(|v| v.concat());
        fuzz("-f file bytes", bytes, |b| {
            std::fs::write(&path, &b).unwrap();
            if let Err(e) = read(&path) {
                prop_assert!(e.starts_with(&format!("{} line ", path.display())), "{e}");
            }
            Ok(())
        });
    }
}

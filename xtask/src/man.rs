//! The man pages of the workspace's commands, `pqos.1` and `rdtset.1`: clap_mangen's NAME,
//! SYNOPSIS and OPTIONS of each command's clap definition, with DESCRIPTION, EXAMPLES (the
//! examples of `--help`, from the definition's after-help), ENVIRONMENT and SEE ALSO around
//! them ([`Page`] says what differs between the two).
//!
//! clap_mangen would print the after-help as one filled paragraph under `EXTRA`, running the
//! example lines together; so its example lines become tagged paragraphs here instead, and
//! its other paragraphs join the description.

use std::io;

use clap::Command;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

/// What a command's page says beyond its clap definition.
#[derive(Debug)]
pub struct Page {
    /// The page's title (`PQOS`).
    pub title: &'static str,
    /// Its file name (`pqos.1`).
    pub file_name: &'static str,
    /// What the description adds to the one-line `about` of the clap definition.
    pub description: &'static str,
    /// Variables the program reads that no option declares, with what they do.
    pub environment: &'static [(&'static str, &'static str)],
    /// SEE ALSO: (page name in bold, the rest).
    pub see_also: &'static [(&'static str, &'static str)],
}

/// `RDT_IFACE`, read by the `rdt` library rather than declared on a flag (see
/// `rdt_pqos::resolve_iface`).
const RDT_IFACE: &str = "OS or MSR (any case): restricts pqos to that interface, as with \
    intel-cmt-cat's pqos, and is the interface --iface=auto (the default) chooses. An --iface \
    or -I that asks for the other interface is an error.";

/// pqos's page.
pub const PQOS: Page = Page {
    title: "PQOS",
    file_name: "pqos.1",
    description: "pqos monitors last-level cache occupancy (CMT), memory bandwidth \
    (MBM), instructions per cycle and LLC misses, and allocates last-level and L2 cache (CAT, \
    CDP) and memory bandwidth (MBA) to classes of service, with the options and the output of \
    intel-cmt-cat's pqos v25.04. It reaches the platform through model-specific registers \
    (--iface=msr), through the kernel's resctrl filesystem (--iface=os or -I), or, with \
    --sim, a simulated platform built from real CPUID dumps, which needs no RDT hardware.",
    environment: &[("RDT_IFACE", RDT_IFACE)],
    see_also: &[
        (
            "pqos",
            "(8) of intel-cmt-cat, whose options and output this pqos follows; the Linux \
             kernel's Documentation/arch/x86/resctrl.rst; Intel SDM Vol. 3B, chapter 18, \
             \"Intel Resource Director Technology\".",
        ),
        (
            "rdtset",
            "(1), which runs a command in a class of service of its own.",
        ),
    ],
};

/// rdtset's page.
pub const RDTSET: Page = Page {
    title: "RDTSET",
    file_name: "rdtset.1",
    description: "rdtset is a taskset-like launcher, as intel-cmt-cat's rdtset(8): it \
    takes a class of service of its own for each -t (cache ways, memory bandwidth, the CPUs \
    the class holds), starts the command in it with the CPU affinity of -c (on the OS \
    interface the command's process joins the class before it runs), forwards SIGINT, \
    SIGTERM and SIGHUP to it, and gives the class back when it exits, with its exit status \
    (128 + N for a command ended by signal N). With -p it places running processes in the \
    class instead, which stays. Each class is taken and given back as one transaction of the \
    rdt library: a failure leaves the platform as it was.",
    environment: &[(
        "RDT_IFACE",
        "OS or MSR (any case): the interface --iface=auto (the default) chooses, as for pqos.",
    )],
    see_also: &[
        (
            "rdtset",
            "(8) of intel-cmt-cat, whose options this rdtset follows.",
        ),
        (
            "pqos",
            "(1), which shows the classes rdtset takes (pqos -s).",
        ),
    ],
};

/// The page, in roff.
///
/// # Errors
/// Only if writing to memory failed, which it does not.
pub fn render(cmd: &Command, spec: &Page) -> io::Result<Vec<u8>> {
    let man = Man::new(cmd.clone())
        .title(spec.title)
        .section("1")
        // The workspace's version: pqos-cli and this crate both take `version.workspace`.
        .source(format!("rdt {}", env!("CARGO_PKG_VERSION")))
        .manual("User Commands");
    let after_help = AfterHelp::parse(
        &cmd.get_after_help()
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    let mut page = Roffs::default();
    page.push_with(|w| man.render_title(w))?;
    page.push(&layout())?;
    page.push_with(|w| man.render_name_section(w))?;
    page.push_with(|w| man.render_synopsis_section(w))?;
    page.push(&description(cmd, spec.description, &after_help.notes))?;
    page.push_with(|w| man.render_options_section(w))?;
    if !after_help.examples.is_empty() {
        page.push(&examples(&after_help.examples))?;
    }
    page.push(&environment(cmd, spec.environment))?;
    page.push(&see_also(spec.see_also))?;
    Ok(page.roff)
}

/// Roff text assembled from parts, each of which `roff` starts with the same two-line
/// apostrophe preamble: it is kept once, at the top.
#[derive(Debug, Default)]
struct Roffs {
    roff: Vec<u8>,
}

impl Roffs {
    fn push_with(
        &mut self,
        render: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut part = Vec::new();
        render(&mut part)?;
        let preamble = Roff::new().render();
        let part = if self.roff.is_empty() {
            &part[..]
        } else {
            part.strip_prefix(preamble.as_bytes()).unwrap_or(&part)
        };
        self.roff.extend_from_slice(part);
        Ok(())
    }

    fn push(&mut self, part: &Roff) -> io::Result<()> {
        self.push_with(|w| part.to_writer(w))
    }
}

/// The definition's after-help: example lines (`  pqos -d    show ...`, under `Examples:`)
/// and the other paragraphs.
#[derive(Debug, Default, PartialEq, Eq)]
struct AfterHelp {
    /// (command line, what it does).
    examples: Vec<(String, String)>,
    /// Paragraphs, each on one line.
    notes: Vec<String>,
}

impl AfterHelp {
    fn parse(text: &str) -> Self {
        let mut parsed = Self::default();
        for paragraph in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
            let mut lines = paragraph.lines();
            if paragraph.trim_start().starts_with("Examples:") {
                lines.next();
                for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
                    // The command and its description are aligned in columns: two or more
                    // spaces end the command (which has single spaces only).
                    let (command, what) = line.split_once("  ").unwrap_or((line, ""));
                    parsed
                        .examples
                        .push((command.trim().to_owned(), what.trim().to_owned()));
                }
            } else {
                let joined: Vec<&str> = lines.map(str::trim).collect();
                parsed.notes.push(joined.join(" "));
            }
        }
        parsed
    }
}

/// No hyphenation, as options broken across lines (`--alloc-as-` `soc`) cannot be copied,
/// and a ragged right margin, as the synopsis's long words otherwise spread out.
fn layout() -> Roff {
    let mut roff = Roff::new();
    roff.control("nh", []);
    roff.control("ad", ["l"]);
    roff
}

/// The definition's long about (if it gets one), the page's description, then the
/// after-help's notes. Its one-line about is the NAME line already, so it is not repeated.
fn description(cmd: &Command, text: &str, notes: &[String]) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["DESCRIPTION"]);
    let long_about = cmd.get_long_about().map(ToString::to_string);
    let paragraphs = long_about
        .iter()
        .flat_map(|text| text.split("\n\n"))
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .chain(std::iter::once(text.to_owned()))
        .chain(notes.iter().cloned());
    for (i, paragraph) in paragraphs.enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(paragraph)]);
    }
    roff
}

fn examples(examples: &[(String, String)]) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXAMPLES"]);
    for (command, what) in examples {
        roff.control("TP", []);
        roff.text([bold(command.as_str())]);
        roff.text([roman(what.as_str())]);
    }
    roff
}

/// The page's variables, then every variable a visible option of `cmd` takes its value from.
fn environment(cmd: &Command, vars: &[(&str, &str)]) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["ENVIRONMENT"]);
    for (var, what) in vars {
        roff.control("TP", []);
        roff.text([bold(*var)]);
        roff.text([roman(*what)]);
    }
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        roff.control("TP", []);
        roff.text([bold(var.to_string_lossy())]);
        roff.text([
            roman("Taken as "),
            bold(format!("--{long}")),
            roman(format!(" when that option is not given. {help}.")),
        ]);
    }
    roff
}

fn see_also(pages: &[(&str, &str)]) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]);
    for (i, (page, rest)) in pages.iter().enumerate() {
        if i > 0 {
            roff.control("br", []);
        }
        roff.text([bold(*page), roman(*rest)]);
    }
    roff
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;
    use crate::{pqos_command, rdtset_command};

    /// Every visible option of a definition as the page's option headers print it:
    /// `-d, --display`, `--sim` (built, so `-h, --help` is included); positional arguments
    /// are left out.
    fn option_headers(mut cmd: Command) -> Vec<String> {
        cmd.build();
        cmd.get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| match (a.get_short(), a.get_long()) {
                (Some(s), Some(l)) => Some(format!("-{s}, --{l}")),
                (Some(s), None) => Some(format!("-{s}")),
                (None, Some(l)) => Some(format!("--{l}")),
                (None, None) => None,
            })
            .collect()
    }

    /// The roff source with fonts and escapes undone, so `\fB\-d\fR, \fB\-\-display\fR` reads
    /// `-d, --display`.
    fn plain_roff(roff: &str) -> String {
        roff.replace("\\fB", "")
            .replace("\\fI", "")
            .replace("\\fR", "")
            .replace("\\fP", "")
            .replace("\\-", "-")
            .replace("\\*(Aq", "'")
    }

    fn page_text() -> String {
        String::from_utf8(render(&pqos_command(), &PQOS).unwrap()).unwrap()
    }

    fn rdtset_text() -> String {
        String::from_utf8(render(&rdtset_command(), &RDTSET).unwrap()).unwrap()
    }

    #[test]
    fn roff_names_every_short_and_long_flag_of_the_definition() {
        // arrange
        let headers = option_headers(pqos_command());
        assert!(headers.len() > 30, "{headers:?}");
        // act
        let text = plain_roff(&page_text());
        // assert
        for header in headers {
            assert!(
                text.lines().any(|l| l.starts_with(&header)),
                "no option header {header:?} in\n{text}"
            );
        }
        assert!(text.contains("--sim-state <PATH>"));
        assert!(
            !text.contains("sim-virtual-clock"),
            "hidden options stay hidden"
        );
    }

    #[test]
    fn roff_has_the_sections_and_every_example() {
        let roff = page_text();
        let text = plain_roff(&roff);
        assert!(roff.starts_with(".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH PQOS 1 "));
        assert_eq!(roff.matches(".ds Aq").count(), 2, "one preamble");
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXAMPLES",
            "ENVIRONMENT",
            "\"SEE ALSO\"",
        ] {
            assert!(roff.contains(&format!("\n.SH {section}\n")), "{section}");
        }
        assert!(!roff.contains(".SH EXTRA"));
        let after_help = pqos_command().get_after_help().unwrap().to_string();
        let parsed = AfterHelp::parse(&after_help);
        assert!(parsed.examples.len() > 10, "{parsed:?}");
        for (command, what) in &parsed.examples {
            assert!(
                command.starts_with("pqos ") && !what.is_empty(),
                "{command}"
            );
            assert!(
                text.contains(&format!("\n{command}\n{what}\n")),
                "{command}"
            );
        }
        assert!(text.contains("\nRDT_IFACE\n") && text.contains("\nRDT_SYSROOT\n"));
        assert!(text.contains("broadwell-ep (default), skylake-sp"));
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(
                "sapphire-rapids-snc2, genoa, turin, turin-dump, xeon-rdt13, or the path of a CPUID dump"
            ),
            "the man page lists every built-in model: {text}"
        );
    }

    #[test]
    fn after_help_splits_into_examples_and_notes() {
        let parsed = AfterHelp::parse(
            "Examples:\n  pqos -d            show it\n  pqos -e \"a b\"      set it\n\n\
             Some note\nwrapped.",
        );
        assert_eq!(
            parsed,
            AfterHelp {
                examples: vec![
                    ("pqos -d".into(), "show it".into()),
                    ("pqos -e \"a b\"".into(), "set it".into()),
                ],
                notes: vec!["Some note wrapped.".into()],
            }
        );
    }

    /// `man -l` of the page, as text: `MANWIDTH=100`, the C locale (ASCII hyphens),
    /// overstrike bold and underline removed. `None` when `man` is not installed.
    fn rendered_by_man() -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PQOS.file_name);
        std::fs::write(&path, render(&pqos_command(), &PQOS).unwrap()).unwrap();
        let out = match std::process::Command::new("man")
            .args(["-P", "cat", "-l"])
            .arg(&path)
            .env("MANWIDTH", "100")
            .env("LC_ALL", "C")
            .env_remove("MANPAGER")
            .env_remove("PAGER")
            .env_remove("MAN_KEEP_FORMATTING")
            .stdin(Stdio::null())
            .output()
        {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => panic!("cannot run man: {e}"),
            Ok(out) => out,
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "man -l failed: {stderr}");
        assert!(
            !stderr.contains("warning") && !stderr.contains("error"),
            "roff complaints: {stderr}"
        );
        Some(strip_overstrike(&String::from_utf8(out.stdout).unwrap()))
    }

    /// What `col -b` does: `X\bX` (bold) and `_\bX` (underline) become `X`.
    fn strip_overstrike(text: &str) -> String {
        let mut out: Vec<char> = Vec::with_capacity(text.len());
        for c in text.chars() {
            if c == '\u{8}' {
                out.pop();
            } else {
                out.push(c);
            }
        }
        out.into_iter().collect()
    }

    #[test]
    fn man_renders_every_flag() {
        let Some(text) = rendered_by_man() else {
            println!(
                "skipped: `man` is not installed (apt-get install man-db), so pqos.1 was not rendered"
            );
            return;
        };
        for header in option_headers(pqos_command()) {
            assert!(
                text.lines().any(|l| l.trim_start().starts_with(&header)),
                "man -l shows no {header:?}:\n{text}"
            );
        }
        for heading in [
            "NAME",
            "SYNOPSIS",
            "OPTIONS",
            "EXAMPLES",
            "ENVIRONMENT",
            "SEE ALSO",
        ] {
            assert!(text.lines().any(|l| l == heading), "{heading}:\n{text}");
        }
        assert!(text.contains("RDT_SYSROOT") && text.contains("RDT_IFACE"));
        assert!(
            text.contains("pqos -m \"all:[2-7];all:[8-10]\" -t 10"),
            "{text}"
        );
    }

    #[test]
    fn rdtset_page_has_every_flag_example_and_section() {
        // arrange
        let headers = option_headers(rdtset_command());
        // act
        let roff = rdtset_text();
        let text = plain_roff(&roff);
        // assert
        assert!(roff.contains("\n.TH RDTSET 1 "), "{roff}");
        for header in &headers {
            assert!(
                text.lines().any(|l| l.starts_with(header.as_str())),
                "no option header {header:?} in\n{text}"
            );
        }
        for flag in [
            "-t, --set",
            "-r, --reset",
            "-p, --pid",
            "-c, --cpu",
            "--keep",
        ] {
            assert!(headers.iter().any(|h| h == flag), "{flag}: {headers:?}");
        }
        assert!(
            !text.contains("exec-in-class"),
            "hidden options stay hidden"
        );
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXAMPLES",
            "ENVIRONMENT",
        ] {
            assert!(roff.contains(&format!("\n.SH {section}\n")), "{section}");
        }
        let parsed = AfterHelp::parse(&rdtset_command().get_after_help().unwrap().to_string());
        assert!(parsed.examples.len() >= 8, "{parsed:?}");
        for (command, what) in &parsed.examples {
            assert!(
                command.starts_with("rdtset ") && !what.is_empty(),
                "{command}"
            );
            assert!(
                text.contains(&format!("\n{command}\n{what}\n")),
                "{command}"
            );
        }
        assert!(text.contains("rdtset -r 0-5 -p $BASHPID"), "{text}");
        assert!(text.contains("SIGINT"), "{text}");
    }
}

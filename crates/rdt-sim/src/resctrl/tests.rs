//! The spec's transcripts and acceptance list, in-process; and what they cannot express.

use super::transcripts::{self, Ctx, InProcess};

#[test]
fn every_spec_transcript_passes_in_process() {
    let ctx = Ctx::simulated();
    let mut failures = Vec::new();
    for t in transcripts::all(&ctx) {
        let mut h = InProcess::mount(t.model, t.options, &ctx).unwrap();
        if let Err(e) = transcripts::run(&t, &mut h) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

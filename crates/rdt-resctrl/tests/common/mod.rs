//! Helpers shared by the integration tests of this crate.

use std::process::{Child, Command};

use rdt_core::TaskId;

/// `sleep 30`, killed and reaped on drop: a short-lived task to place or monitor.
pub struct Sleeper(Child);

impl Sleeper {
    /// Starts one.
    pub fn sleep() -> Self {
        Self(
            Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("spawn sleep"),
        )
    }

    /// Its process id.
    pub fn id(&self) -> TaskId {
        TaskId::new(self.0.id())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

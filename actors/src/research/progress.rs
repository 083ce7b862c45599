//! What `research` shows on a terminal while nodes run: a spinner line on stderr naming the nodes
//! running now and for how long (`⠋ 3.2s running create_plan`), so a slow model is seen working
//! rather than silent. When stderr is not a terminal (piped, redirected, CI) nothing extra is
//! written: the spinner draws nowhere. The progress lines of `render::progress` still go to
//! stdout, printed around the spinner so the two never garble each other.

use planwright::RunEvent;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

/// The nodes running now (a node may run several tasks at once, as `execute_step` does).
#[derive(Debug, Default)]
pub struct Running {
    nodes: BTreeMap<String, usize>,
}

impl Running {
    /// Takes in an event; gives the new spinner message when the running nodes changed.
    pub fn see(&mut self, event: &RunEvent) -> Option<String> {
        match event {
            RunEvent::NodeStarted { node, .. } => {
                *self.nodes.entry(node.clone()).or_insert(0) += 1;
            }
            RunEvent::NodeFinished { node, .. } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    *n -= 1;
                    if *n == 0 {
                        self.nodes.remove(node);
                    }
                }
            }
            _ => return None,
        }
        Some(self.message())
    }

    /// `running create_plan`, `running execute_step ×3, replan`, or `between nodes`.
    pub fn message(&self) -> String {
        if self.nodes.is_empty() {
            return "between nodes".into();
        }
        let names: Vec<String> = self
            .nodes
            .iter()
            .map(|(n, k)| {
                if *k > 1 {
                    format!("{n} ×{k}")
                } else {
                    n.clone()
                }
            })
            .collect();
        format!("running {}", names.join(", "))
    }
}

/// The spinner on stderr (hidden unless stderr is a terminal and `enabled`).
pub struct Spinner {
    bar: indicatif::ProgressBar,
    running: Running,
}

impl Spinner {
    /// A spinner when `enabled` and stderr is a terminal; otherwise one that draws nothing.
    pub fn on_stderr(enabled: bool) -> Self {
        let bar = if enabled && std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new_spinner();
            if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
            {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        Spinner {
            bar,
            running: Running::default(),
        }
    }

    /// Takes in a run event.
    pub fn event(&mut self, event: &RunEvent) {
        if let Some(msg) = self.running.see(event) {
            self.bar.set_message(msg);
        }
    }

    /// Prints a line on stdout without garbling the spinner.
    pub fn println(&self, line: &str) {
        self.bar.suspend(|| println!("{line}"));
    }

    /// Clears the spinner.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwright::TaskId;

    fn started(node: &str) -> RunEvent {
        RunEvent::NodeStarted {
            node: node.into(),
            task: TaskId { step: 1, index: 0 },
            attempt: 1,
        }
    }

    fn finished(node: &str) -> RunEvent {
        RunEvent::NodeFinished {
            node: node.into(),
            task: TaskId { step: 1, index: 0 },
            attempt: 1,
            duration_us: 1,
            queued_us: 0,
            error: None,
        }
    }

    #[test]
    fn the_message_names_the_nodes_running_now() {
        let mut r = Running::default();
        assert_eq!(
            r.see(&started("create_plan")).as_deref(),
            Some("running create_plan")
        );
        assert_eq!(
            r.see(&finished("create_plan")).as_deref(),
            Some("between nodes")
        );
        r.see(&started("execute_step"));
        r.see(&started("execute_step"));
        assert_eq!(
            r.see(&started("replan")).as_deref(),
            Some("running execute_step ×2, replan")
        );
        assert_eq!(
            r.see(&finished("execute_step")).as_deref(),
            Some("running execute_step, replan")
        );
        // Other events leave the message as it is; a stray finish changes nothing.
        let custom = RunEvent::Custom {
            node: "x".into(),
            task: TaskId { step: 1, index: 0 },
            payload: serde_json::json!({}),
        };
        assert_eq!(r.see(&custom), None);
        assert_eq!(
            r.see(&finished("unknown")).as_deref(),
            Some("running execute_step, replan")
        );
    }

    #[test]
    fn a_spinner_off_a_terminal_draws_nothing() {
        // Under `cargo test` stderr is captured or piped: hidden, whatever is asked.
        let s = Spinner::on_stderr(true);
        if !std::io::stderr().is_terminal() {
            assert!(s.bar.is_hidden());
        }
        assert!(Spinner::on_stderr(false).bar.is_hidden());
    }
}

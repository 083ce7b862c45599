//! What a run's API request gives the graph besides its input: the request's `config`, `context`
//! and `metadata` (an assistant created over the API contributes its own underneath), handed to
//! every node of the run as its run context ([`planwright::RunOptions::context`]). A node of a
//! served graph reads it as LangGraph's nodes read `config["configurable"]` and
//! `runtime.context`:
//!
//! ```ignore
//! let tone = ctx
//!     .context::<RunRequest>()
//!     .and_then(|r| r.configurable("tone"))
//!     .and_then(|v| v.as_str());
//! ```
//!
//! Like every run context it is never checkpointed: a resumed run's nodes see the resuming
//! request's.

use serde_json::Value;

/// A run's request as its nodes see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunRequest {
    /// The thread the run is on.
    pub thread_id: String,
    /// The assistant the request named (one created over the API, or a registered graph's id).
    pub assistant_id: String,
    /// The registered graph the run runs.
    pub graph_id: String,
    /// The request's `config` (`Null` when it gave none).
    pub config: Value,
    /// The request's `context` (`Null` when it gave none).
    pub context: Value,
    /// The request's `metadata` (`Null` when it gave none).
    pub metadata: Value,
}

impl RunRequest {
    /// `config.configurable[key]`.
    pub fn configurable(&self, key: &str) -> Option<&Value> {
        self.config.get("configurable")?.get(key)
    }

    /// `context[key]`.
    pub fn context_value(&self, key: &str) -> Option<&Value> {
        self.context.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_configurable_and_context_keys() {
        let r = RunRequest {
            config: json!({"configurable": {"tone": "warm"}}),
            context: json!({"user": "ann"}),
            ..RunRequest::default()
        };
        assert_eq!(r.configurable("tone"), Some(&json!("warm")));
        assert_eq!(r.configurable("nope"), None);
        assert_eq!(r.context_value("user"), Some(&json!("ann")));
        assert_eq!(RunRequest::default().configurable("tone"), None);
    }
}

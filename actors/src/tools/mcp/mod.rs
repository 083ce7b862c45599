//! An MCP client for plan steps: the tool servers a run is given (`--tools mcp+stdio:…`,
//! `--tools mcp+http://…`), their tools with their input schemas, and calls with a timeout,
//! retries and the run's cancellation.
//!
//! Real users keep their tools (search engines, document stores, file systems) behind the Model
//! Context Protocol; this module is how a planner's steps reach them. It uses the official Rust
//! SDK (`rmcp`) for the protocol. A server is connected once, when the graph is built, and shared
//! by every step of every run: a stdio server is one child process, and its requests are
//! multiplexed (steps call it in parallel).
//!
//! What a call returns is reduced to text a planner can quote ([`ToolContent`]); a result that
//! has none, or only binary noise, is an error ([`McpError::Garbage`]) like a tool's own error or
//! a timeout, so a planner treats all three as a failed step.

mod call;
mod choose;
mod error;
mod spec;

pub use call::{with_retries, AttemptError, CallPolicy};
pub use choose::{arguments_for, choose, citation_id, Choice};
pub use error::McpError;
pub use spec::{split_command, unique_names, ServerSpec, Transport};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// A tool a connected server offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The server's name (see [`ServerSpec::name`]).
    pub server: String,
    /// The tool's name on its server.
    pub name: String,
    /// What it does, as the server describes it (what the offline choice matches a step to).
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    pub input_schema: Value,
    /// The server's `readOnlyHint`, if it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
}

/// What a tool returned, as a planner reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolContent {
    /// The text blocks (and embedded text resources) joined by blank lines; a result with only
    /// structured content gives its JSON text.
    pub text: String,
    /// The structured content, when the tool gave one.
    pub structured: Option<Value>,
    /// Attempts the call took.
    pub attempts: u32,
}

/// Text longer than this is cut (at a character boundary) before it becomes evidence.
pub const MAX_TEXT: usize = 64 * 1024;

/// Sends one `tools/call` to a server: the SDK's client, or a stand-in in tests.
pub trait ToolBackend: Send + Sync {
    /// Calls `tool` with `arguments`; the result is the `CallToolResult` as JSON.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, AttemptError>> + Send + 'a>>;
}

/// The SDK's client over one connection.
struct RmcpBackend {
    service: RunningService<RoleClient, ()>,
}

impl ToolBackend for RmcpBackend {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, AttemptError>> + Send + 'a>> {
        Box::pin(async move {
            let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
            match self.service.peer().call_tool(params).await {
                Ok(result) => serde_json::to_value(&result)
                    .map_err(|e| AttemptError::Transient(format!("unreadable result: {e}"))),
                Err(rmcp::ServiceError::McpError(e)) => {
                    // A JSON-RPC error from the server (unknown tool, invalid arguments): asking
                    // again gets the same answer.
                    Err(AttemptError::Lasting(McpError::ToolError {
                        server: String::new(),
                        tool: tool.to_string(),
                        message: e.message.to_string(),
                    }))
                }
                Err(e) => Err(AttemptError::Transient(e.to_string())),
            }
        })
    }
}

/// One connected server.
struct Server {
    name: String,
    backend: Arc<dyn ToolBackend>,
}

/// The tool servers of a graph, connected, with their tools.
pub struct McpTools {
    servers: Vec<Server>,
    tools: Vec<ToolInfo>,
    policy: CallPolicy,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTools")
            .field("servers", &self.server_names())
            .field("tools", &self.tools.len())
            .field("policy", &self.policy)
            .finish()
    }
}

/// The last bytes of a child's stderr, kept to explain a failed handshake.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<String>>);

impl StderrTail {
    const KEEP: usize = 2_000;

    fn follow(&self, stderr: tokio::process::ChildStderr) {
        use tokio::io::AsyncReadExt;
        let tail = self.0.clone();
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let Ok(mut t) = tail.lock() else { break };
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > Self::KEEP {
                    let mut cut = t.len() - Self::KEEP;
                    while !t.is_char_boundary(cut) {
                        cut += 1;
                    }
                    t.drain(..cut);
                }
            }
        });
    }

    fn text(&self) -> String {
        self.0
            .lock()
            .map(|t| t.trim().to_string())
            .unwrap_or_default()
    }
}

async fn connect_one(
    spec: &ServerSpec,
    policy: &CallPolicy,
) -> Result<(Server, Vec<ToolInfo>), McpError> {
    let target = spec.transport.to_string();
    let timed_out = |doing| McpError::ConnectTimeout {
        server: spec.name.clone(),
        target: target.clone(),
        after: policy.connect_timeout,
        doing,
    };
    let tail = StderrTail::default();
    let started = match &spec.transport {
        Transport::Stdio { program, args } => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            let (proc, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|source| McpError::Spawn {
                    server: spec.name.clone(),
                    target: target.clone(),
                    source,
                })?;
            if let Some(stderr) = stderr {
                tail.follow(stderr);
            }
            tokio::time::timeout(policy.connect_timeout, ().serve(proc)).await
        }
        Transport::Http { url } => {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.as_str());
            tokio::time::timeout(policy.connect_timeout, ().serve(transport)).await
        }
    };
    let service = match started {
        Err(_) => return Err(timed_out("connecting")),
        Ok(Err(e)) => {
            // The child may still be writing why it failed.
            tokio::task::yield_now().await;
            let stderr = tail.text();
            let detail = if stderr.is_empty() {
                e.to_string()
            } else {
                format!("{e}; its stderr ends: {stderr}")
            };
            return Err(McpError::Handshake {
                server: spec.name.clone(),
                target,
                detail,
            });
        }
        Ok(Ok(s)) => s,
    };
    let listed = tokio::time::timeout(policy.connect_timeout, service.peer().list_all_tools())
        .await
        .map_err(|_| timed_out("listing its tools"))?
        .map_err(|e| McpError::ListTools {
            server: spec.name.clone(),
            detail: e.to_string(),
        })?;
    let tools = listed
        .into_iter()
        .map(|t| ToolInfo {
            server: spec.name.clone(),
            name: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_string(),
            input_schema: Value::Object((*t.input_schema).clone()),
            read_only: t.annotations.as_ref().and_then(|a| a.read_only_hint),
        })
        .collect();
    Ok((
        Server {
            name: spec.name.clone(),
            backend: Arc::new(RmcpBackend { service }),
        },
        tools,
    ))
}

/// The tool servers of a command's `--tools` values, connected under `policy`; `None` without
/// any. A malformed value is [`McpError::BadSpec`] ([`McpError::is_bad_input`]).
pub async fn connect_flags(
    values: &[String],
    policy: CallPolicy,
) -> Result<Option<Arc<McpTools>>, McpError> {
    if values.is_empty() {
        return Ok(None);
    }
    let specs = values
        .iter()
        .map(|v| v.parse::<ServerSpec>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Arc::new(McpTools::connect(&specs, policy).await?)))
}

impl McpTools {
    /// Connects every server (at the same time) and lists its tools. The first server that fails
    /// to start, to speak MCP or to list its tools is the error, named.
    pub async fn connect(specs: &[ServerSpec], policy: CallPolicy) -> Result<Self, McpError> {
        let mut specs = specs.to_vec();
        unique_names(&mut specs);
        let connected =
            futures::future::join_all(specs.iter().map(|s| connect_one(s, &policy))).await;
        let mut servers = Vec::new();
        let mut tools = Vec::new();
        for c in connected {
            let (server, listed) = c?;
            servers.push(server);
            tools.extend(listed);
        }
        Ok(Self {
            servers,
            tools,
            policy,
        })
    }

    /// Tool servers from backends already connected (a test's stand-in, or an embedder's own
    /// transport): each backend with its server's name and tools.
    pub fn from_backends(
        backends: Vec<(String, Vec<ToolInfo>, Arc<dyn ToolBackend>)>,
        policy: CallPolicy,
    ) -> Self {
        let mut servers = Vec::new();
        let mut tools = Vec::new();
        for (name, listed, backend) in backends {
            tools.extend(listed.into_iter().map(|mut t| {
                t.server = name.clone();
                t
            }));
            servers.push(Server { name, backend });
        }
        Self {
            servers,
            tools,
            policy,
        }
    }

    /// Every tool of every server, servers in the order given.
    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    /// The servers' names, in order.
    pub fn server_names(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.name.as_str()).collect()
    }

    /// The call policy.
    pub fn policy(&self) -> &CallPolicy {
        &self.policy
    }

    /// The tool `tool`, on `server` when given, else on the first server that has it.
    pub fn find(&self, server: Option<&str>, tool: &str) -> Result<&ToolInfo, McpError> {
        if let Some(s) = server {
            if !self.servers.iter().any(|x| x.name == s) {
                return Err(McpError::UnknownServer {
                    server: s.to_string(),
                    connected: self.server_names().join(", "),
                });
            }
        }
        self.tools
            .iter()
            .find(|t| t.name == tool && server.is_none_or(|s| t.server == s))
            .ok_or_else(|| McpError::UnknownTool {
                tool: tool.to_string(),
                servers: match server {
                    Some(s) => format!("tool server `{s}`"),
                    None => format!("the tool servers ({})", self.server_names().join(", ")),
                },
            })
    }

    /// Calls `tool` on `server` with `arguments`, under the call policy, until `cancel` resolves.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        cancel: Pin<&mut (dyn Future<Output = ()> + Send)>,
    ) -> Result<ToolContent, McpError> {
        let backend = &self
            .servers
            .iter()
            .find(|s| s.name == server)
            .ok_or_else(|| McpError::UnknownServer {
                server: server.to_string(),
                connected: self.server_names().join(", "),
            })?
            .backend;
        let (value, attempts) = with_retries(&self.policy, server, tool, cancel, || {
            backend.call(tool, arguments.clone())
        })
        .await
        .map_err(|e| match e {
            McpError::ToolError { message, .. } => McpError::ToolError {
                server: server.to_string(),
                tool: tool.to_string(),
                message,
            },
            other => other,
        })?;
        let mut content = content_of(server, tool, &value)?;
        content.attempts = attempts;
        Ok(content)
    }
}

/// The share of a text's characters that may be control characters or replacement characters
/// before the text counts as binary noise.
const MAX_NOISE: f64 = 0.1;

/// Reads a `CallToolResult` (as JSON) into what a planner can quote.
pub fn content_of(server: &str, tool: &str, result: &Value) -> Result<ToolContent, McpError> {
    let garbage = |detail: String| McpError::Garbage {
        server: server.to_string(),
        tool: tool.to_string(),
        detail,
    };
    let Some(obj) = result.as_object() else {
        return Err(garbage(format!(
            "the result is not an object: {}",
            clip(result)
        )));
    };
    let mut texts: Vec<&str> = Vec::new();
    if let Some(blocks) = obj.get("content") {
        let Some(blocks) = blocks.as_array() else {
            return Err(garbage("`content` is not a list".into()));
        };
        for b in blocks {
            let text = match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str),
                Some("resource") => b
                    .get("resource")
                    .and_then(|r| r.get("text"))
                    .and_then(Value::as_str),
                _ => None,
            };
            if let Some(t) = text.filter(|t| !t.trim().is_empty()) {
                texts.push(t);
            }
        }
    }
    let structured = obj.get("structuredContent").cloned();
    let mut text = texts.join("\n\n");
    if obj.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(McpError::ToolError {
            server: server.to_string(),
            tool: tool.to_string(),
            message: if text.is_empty() {
                "(no message)".into()
            } else {
                clip_str(&text, 300)
            },
        });
    }
    if text.is_empty() {
        match &structured {
            Some(v) if !v.is_null() => text = v.to_string(),
            _ => return Err(garbage("no text content".into())),
        }
    }
    let chars = text.chars().count();
    let noise = text
        .chars()
        .filter(|c| (c.is_control() && !matches!(c, '\n' | '\r' | '\t')) || *c == '\u{FFFD}')
        .count();
    if noise as f64 > MAX_NOISE * chars as f64 {
        return Err(garbage(format!(
            "{noise} of its {chars} characters are control or undecodable characters"
        )));
    }
    if text.len() > MAX_TEXT {
        let mut cut = MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    Ok(ToolContent {
        text,
        structured,
        attempts: 1,
    })
}

fn clip(v: &Value) -> String {
    clip_str(&v.to_string(), 120)
}

fn clip_str(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_blocks_and_text_resources_are_the_content() {
        let c = content_of(
            "s",
            "t",
            &json!({"content": [
                {"type": "text", "text": "First."},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "Second."}}
            ]}),
        )
        .unwrap();
        assert_eq!(c.text, "First.\n\nSecond.");
        let c = content_of(
            "s",
            "t",
            &json!({"content": [], "structuredContent": {"n": 3}}),
        )
        .unwrap();
        assert_eq!(c.text, r#"{"n":3}"#);
    }

    #[test]
    fn errors_and_garbage_name_the_server_and_tool() {
        let e = content_of(
            "fs",
            "read",
            &json!({"isError": true, "content": [{"type": "text", "text": "ENOENT"}]}),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "fs/read returned an error: ENOENT");
        for bad in [
            json!(42),
            json!({"content": "x"}),
            json!({"content": []}),
            json!({"content": [{"type": "text", "text": "\u{0}\u{1}\u{2}\u{3}ab"}]}),
        ] {
            let e = content_of("fs", "read", &bad).unwrap_err();
            assert!(
                matches!(e, McpError::Garbage { .. }) && e.to_string().starts_with("fs/read "),
                "{bad}: {e}"
            );
        }
    }
}

//! `sap.lock`: what `sapc mcp import` saw of each tool — a hash of its input and output
//! schemas, and the schemas themselves, so that a run can name what changed.
//!
//! ```json
//! { "version": 1,
//!   "mcp": { "everything": { "tools": {
//!     "get-sum": { "hash": "sha256:…", "input": { … }, "output": null } } } } }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use rmcp::model::Tool;
use serde_json::{Map, Value as JsonValue, json};
use sha2::{Digest, Sha256};

use super::import::required;

/// What the lock holds of one tool.
#[derive(Clone, Debug, PartialEq)]
pub struct LockedTool {
    pub hash: String,
    pub input: JsonValue,
    pub output: JsonValue,
}

impl LockedTool {
    pub fn of(tool: &Tool) -> LockedTool {
        let input = JsonValue::Object((*tool.input_schema).clone());
        let output = tool
            .output_schema
            .as_ref()
            .map(|o| JsonValue::Object((**o).clone()))
            .unwrap_or(JsonValue::Null);
        let canonical = canonical(&json!({ "input": input, "output": output })).to_string();
        let digest = Sha256::digest(canonical.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        LockedTool {
            hash: format!("sha256:{hex}"),
            input,
            output,
        }
    }

    /// What differs between this (the imported tool) and `now`, in a few words.
    pub fn describe_change(&self, now: &LockedTool) -> String {
        let mut changes = Vec::new();
        let props = |s: &JsonValue| -> Map<String, JsonValue> {
            s.get("properties")
                .and_then(JsonValue::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let (old, new) = (props(&self.input), props(&now.input));
        for name in old.keys() {
            if !new.contains_key(name) {
                changes.push(format!("parameter `{name}` was removed"));
            }
        }
        for (name, schema) in &new {
            match old.get(name) {
                None => changes.push(format!("parameter `{name}` was added")),
                Some(before) if canonical(before) != canonical(schema) => {
                    changes.push(format!(
                        "parameter `{name}` was {} and is now {}",
                        short(before),
                        short(schema)
                    ));
                }
                Some(_) => {}
            }
        }
        let (req_old, req_new) = (required(&self.input), required(&now.input));
        for name in &req_new {
            if !req_old.contains(name) && old.contains_key(name) {
                changes.push(format!("parameter `{name}` became required"));
            }
        }
        match (&self.output, &now.output) {
            (JsonValue::Null, JsonValue::Null) => {}
            (JsonValue::Null, _) => changes.push("an output schema was added".to_owned()),
            (_, JsonValue::Null) => changes.push("its output schema was removed".to_owned()),
            (a, b) if canonical(a) != canonical(b) => changes.push(format!(
                "its output schema was {} and is now {}",
                short(a),
                short(b)
            )),
            _ => {}
        }
        if changes.is_empty() {
            changes.push("its input schema changed".to_owned());
        }
        changes.join("; ")
    }

    fn to_json(&self) -> JsonValue {
        json!({ "hash": self.hash, "input": self.input, "output": self.output })
    }

    fn from_json(v: &JsonValue) -> Option<LockedTool> {
        Some(LockedTool {
            hash: v.get("hash")?.as_str()?.to_owned(),
            input: v.get("input").cloned().unwrap_or(JsonValue::Null),
            output: v.get("output").cloned().unwrap_or(JsonValue::Null),
        })
    }
}

/// The whole lock: servers, then tools, in name order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolLock {
    servers: BTreeMap<String, BTreeMap<String, LockedTool>>,
}

impl ToolLock {
    /// Reads `path`; a missing file is an empty lock.
    pub fn read(path: &Path) -> Result<ToolLock, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ToolLock::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let json: JsonValue = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not valid JSON: {e}", path.display()))?;
        let mut lock = ToolLock::default();
        let servers = json.get("mcp").and_then(JsonValue::as_object);
        for (server, entry) in servers.into_iter().flatten() {
            let tools = entry.get("tools").and_then(JsonValue::as_object);
            let mut out = BTreeMap::new();
            for (tool, v) in tools.into_iter().flatten() {
                let locked = LockedTool::from_json(v).ok_or_else(|| {
                    format!(
                        "{}: the entry of tool `{tool}` of server `{server}` has no hash",
                        path.display()
                    )
                })?;
                out.insert(tool.clone(), locked);
            }
            lock.servers.insert(server.clone(), out);
        }
        Ok(lock)
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let mut servers = Map::new();
        for (server, tools) in &self.servers {
            let tools: Map<String, JsonValue> = tools
                .iter()
                .map(|(name, t)| (name.clone(), t.to_json()))
                .collect();
            servers.insert(server.clone(), json!({ "tools": tools }));
        }
        let json = json!({ "version": 1, "mcp": servers });
        let text = serde_json::to_string_pretty(&json).unwrap_or_default() + "\n";
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub fn tool(&self, server: &str, tool: &str) -> Option<&LockedTool> {
        self.servers.get(server)?.get(tool)
    }

    /// Replaces what the lock holds of `server` with `tools`.
    pub fn set_server(&mut self, server: &str, tools: &[Tool]) {
        self.servers.insert(
            server.to_owned(),
            tools
                .iter()
                .map(|t| (t.name.to_string(), LockedTool::of(t)))
                .collect(),
        );
    }
}

/// The value with every object's keys sorted, so equal schemas hash and compare equal
/// whatever order a server writes them in.
fn canonical(v: &JsonValue) -> JsonValue {
    match v {
        JsonValue::Object(map) => {
            let sorted: BTreeMap<&String, JsonValue> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            JsonValue::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        JsonValue::Array(items) => JsonValue::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// A schema in a few characters: its type, or its JSON cut short.
fn short(schema: &JsonValue) -> String {
    if let Some(t) = schema.get("type").and_then(JsonValue::as_str)
        && schema.as_object().is_some_and(|o| o.len() <= 2)
    {
        return format!("`{t}`");
    }
    format!(
        "`{}`",
        runtime::error::shorten(&canonical(schema).to_string(), 60)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(name: &str, input: JsonValue, output: Option<JsonValue>) -> Tool {
        let mut t = Tool::new(
            name.to_owned(),
            "",
            Arc::new(input.as_object().unwrap().clone()),
        );
        t.output_schema = output.map(|o| Arc::new(o.as_object().unwrap().clone()));
        t
    }

    #[test]
    fn the_hash_ignores_key_order_and_names_the_change() {
        let a = tool(
            "get-sum",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            None,
        );
        let reordered = tool(
            "get-sum",
            json!({"required": ["a", "b"], "properties": {"b": {"type": "number"}, "a": {"type": "number"}}, "type": "object"}),
            None,
        );
        assert_eq!(LockedTool::of(&a), LockedTool::of(&reordered));
        let changed = tool(
            "get-sum",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "number"}}}),
            Some(json!({"type": "object"})),
        );
        let change = LockedTool::of(&a).describe_change(&LockedTool::of(&changed));
        assert_eq!(
            change,
            "parameter `b` was removed; parameter `a` was `number` and is now `string`; parameter `c` was added; an output schema was added"
        );
    }

    #[test]
    fn the_lock_round_trips_through_its_file() {
        let dir = test_support::Scratch::new("lock");
        let path = dir.join("sap.lock");
        assert_eq!(ToolLock::read(&path).unwrap(), ToolLock::default());
        let mut lock = ToolLock::default();
        lock.set_server(
            "everything",
            &[tool(
                "echo",
                json!({"type": "object", "properties": {"message": {"type": "string"}}}),
                None,
            )],
        );
        lock.write(&path).unwrap();
        let back = ToolLock::read(&path).unwrap();
        assert_eq!(back, lock);
        assert!(
            back.tool("everything", "echo")
                .unwrap()
                .hash
                .starts_with("sha256:")
        );
        std::fs::write(&path, "{").unwrap();
        assert!(
            ToolLock::read(&path)
                .unwrap_err()
                .contains("not valid JSON")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

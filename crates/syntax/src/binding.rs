//! What the string of `extern "…" fn` means: where a declared extern's tool lives.
//!
//! - `mcp:SERVER` — the tool of the same name on the MCP server `SERVER` of `sap.toml`;
//!   `mcp:SERVER/TOOL` names the tool when its name is not a sap identifier
//!   (`extern "mcp:everything/get-sum" fn get_sum(…)`).
//! - `std:MODULE/TOOL` — a standard tool behind a grant (`fs`, `http`, `process`); the
//!   prelude modules declare these.
//! - `python` — a function of the Python application that loads the program (`saplang`,
//!   `externs={…}`): outside the program, so its results are untrusted like a tool's.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExternBinding {
    Mcp {
        server: String,
        tool: Option<String>,
    },
    Std {
        module: String,
        tool: String,
    },
    /// Served by the Python application that loads the program.
    Python,
}

impl ExternBinding {
    /// Reads a binding string; the error says what a binding looks like.
    pub fn parse(text: &str) -> Result<ExternBinding, String> {
        if text == "python" {
            return Ok(ExternBinding::Python);
        }
        let (kind, rest) = text.split_once(':').ok_or_else(|| {
            format!(
                "`{text}` is not a binding: write `mcp:SERVER`, `mcp:SERVER/TOOL`, `std:MODULE/TOOL` or `python`"
            )
        })?;
        let (first, tool) = match rest.split_once('/') {
            Some((first, tool)) => (first, Some(tool)),
            None => (rest, None),
        };
        let is_name = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        };
        if !is_name(first) {
            return Err(format!(
                "`{first}` is not a server name: use letters, digits, `_`, `-` or `.`"
            ));
        }
        if let Some(tool) = tool
            && (tool.is_empty() || tool.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(format!("`{tool}` is not a tool name"));
        }
        match kind {
            "mcp" => Ok(ExternBinding::Mcp {
                server: first.to_owned(),
                tool: tool.map(str::to_owned),
            }),
            "std" => match tool {
                Some(tool) => Ok(ExternBinding::Std {
                    module: first.to_owned(),
                    tool: tool.to_owned(),
                }),
                None => Err("a standard tool is written `std:MODULE/TOOL`".to_owned()),
            },
            other => Err(format!(
                "`{other}:` is not a kind of extern: the kinds are `mcp:` (an MCP server of sap.toml), `std:` (a standard tool) and `python` (a function of the Python application)"
            )),
        }
    }

    /// The tool's own name, for a declaration named `declared`.
    pub fn tool<'a>(&'a self, declared: &'a str) -> &'a str {
        match self {
            ExternBinding::Mcp { tool, .. } => tool.as_deref().unwrap_or(declared),
            ExternBinding::Std { tool, .. } => tool,
            ExternBinding::Python => declared,
        }
    }
}

impl fmt::Display for ExternBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternBinding::Mcp { server, tool: None } => write!(f, "mcp:{server}"),
            ExternBinding::Mcp {
                server,
                tool: Some(tool),
            } => write!(f, "mcp:{server}/{tool}"),
            ExternBinding::Std { module, tool } => write!(f, "std:{module}/{tool}"),
            ExternBinding::Python => f.write_str("python"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_read_and_print_back() {
        for text in [
            "mcp:everything",
            "mcp:everything/get-sum",
            "std:fs/read",
            "python",
        ] {
            assert_eq!(ExternBinding::parse(text).unwrap().to_string(), text);
        }
        let b = ExternBinding::parse("mcp:notes").unwrap();
        assert_eq!(b.tool("read_file"), "read_file");
        let b = ExternBinding::parse("mcp:everything/get-sum").unwrap();
        assert_eq!(b.tool("get_sum"), "get-sum");
    }

    #[test]
    fn malformed_bindings_say_what_a_binding_is() {
        assert!(
            ExternBinding::parse("everything")
                .unwrap_err()
                .contains("mcp:SERVER")
        );
        assert!(
            ExternBinding::parse("ftp:x")
                .unwrap_err()
                .contains("`ftp:`")
        );
        assert!(
            ExternBinding::parse("mcp:")
                .unwrap_err()
                .contains("server name")
        );
        assert!(
            ExternBinding::parse("mcp:a b")
                .unwrap_err()
                .contains("server name")
        );
        assert!(
            ExternBinding::parse("mcp:s/")
                .unwrap_err()
                .contains("tool name")
        );
        assert!(
            ExternBinding::parse("std:fs")
                .unwrap_err()
                .contains("std:MODULE/TOOL")
        );
    }
}

//! The standard tools (`fs`, `http`, `process`), denied unless granted — Deno's model.
//!
//! Grants come from `--allow-read=DIR`, `--allow-write=DIR`, `--allow-net=HOST[:PORT]`,
//! `--allow-run=PROGRAM` and the `[permissions]` table of `sap.toml`. A path is allowed
//! when, with `..` and symbolic links resolved, it lies inside a granted folder: an
//! escape by `..`, by an absolute path or by a link is refused like any other path. A
//! refused call is an error that names the flag to add — or, when the run has a
//! [`Client`] (an editor), a question to its user: allowed once, allowed for the rest of
//! the session, or refused with the same error. With a client that hands files, `fs::read`
//! and `fs::write` go through it (an editor's unsaved buffers), still within the grants.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value as JsonValue;

use llm::types::TypeDesc;
use runtime::value::{Value, decode};

use crate::client::{Access, Answer, Client, Permission};

/// What a run may touch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grants {
    /// Folders (canonical) whose files may be read, and listed.
    pub read: Vec<PathBuf>,
    /// Folders (canonical) whose files may be written.
    pub write: Vec<PathBuf>,
    /// Hosts, each with a port or any port.
    pub net: Vec<(String, Option<u16>)>,
    /// Programs, as the program names them (`git`, `/usr/bin/python3`).
    pub run: Vec<String>,
}

impl Grants {
    /// Adds a folder to `read` or `write`; `base` resolves a relative one. A folder that
    /// does not exist is an error, so a typo does not pass silently.
    pub fn add_dir(list: &mut Vec<PathBuf>, dir: &str, base: &Path) -> Result<(), String> {
        let path = base.join(dir);
        let canonical = path
            .canonicalize()
            .map_err(|e| format!("cannot grant access to {}: {e}", path.display()))?;
        list.push(canonical);
        Ok(())
    }

    /// Adds `HOST` or `HOST:PORT` to `net`.
    pub fn add_net(&mut self, spec: &str) -> Result<(), String> {
        let bad = || format!("`{spec}` is not HOST or HOST:PORT");
        let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
            // `[::1]` or `[::1]:8080`.
            let (host, after) = rest.split_once(']').ok_or_else(bad)?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
                None if after.is_empty() => None,
                None => return Err(bad()),
            };
            (host.to_owned(), port)
        } else if spec.matches(':').count() == 1 {
            let (host, port) = spec.split_once(':').ok_or_else(bad)?;
            (
                host.to_owned(),
                Some(port.parse::<u16>().map_err(|_| bad())?),
            )
        } else {
            (spec.to_owned(), None)
        };
        if host.is_empty() {
            return Err(format!("`{spec}` is not HOST or HOST:PORT"));
        }
        self.net.push((host.to_ascii_lowercase(), port));
        Ok(())
    }

    /// What reading `path` (canonicalized) asks; an error when it cannot be resolved.
    fn read_access(tool: &str, path: &str) -> Result<Permission, String> {
        let target = Path::new(path)
            .canonicalize()
            .map_err(|e| format!("`{tool}`: cannot read {path}: {e}"))?;
        let scope = suggest_dir(&target);
        let refusal = refusal(tool, &format!("read {path}"), "read", &scope);
        Ok(Permission::new(tool, Access::Read(target), scope, refusal))
    }

    /// What writing `path` asks: its folder resolved, and the file itself, if it is a
    /// link, resolved too.
    fn write_access(tool: &str, path: &str) -> Result<Permission, String> {
        let p = Path::new(path);
        let name = p
            .file_name()
            .ok_or_else(|| format!("`{tool}`: {path} does not name a file"))?;
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let cannot = |e: std::io::Error| format!("`{tool}`: cannot write {path}: {e}");
        let mut target = parent.canonicalize().map_err(cannot)?.join(name);
        if target.is_symlink() {
            target = target.canonicalize().map_err(cannot)?;
        }
        let scope = suggest_dir(&target);
        let refusal = refusal(tool, &format!("write {path}"), "write", &scope);
        Ok(Permission::new(tool, Access::Write(target), scope, refusal))
    }

    /// What connecting to `url`'s host and port asks.
    fn net_access(tool: &str, url: &reqwest::Url) -> Permission {
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let host = host.trim_matches(['[', ']']).to_owned();
        let shown = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let refusal = refusal(tool, &format!("connect to {shown}"), "net", &shown);
        let access = Access::Net {
            host: host.clone(),
            port: url.port_or_known_default(),
        };
        Permission::new(tool, access, host, refusal)
    }

    /// What running `program` asks.
    fn run_access(program: &str) -> Permission {
        let tool = "process::run";
        let refusal = refusal(tool, &format!("run `{program}`"), "run", program);
        Permission::new(
            tool,
            Access::Run(program.to_owned()),
            program.to_owned(),
            refusal,
        )
    }

    /// Whether these grants allow what `permission` asks: a path inside a granted folder,
    /// a granted host (on any port, or that one), a granted program. (A grant given
    /// "always" in a session covers the same tool's later calls inside it.)
    pub fn covers(&self, permission: &Permission) -> bool {
        let inside = |roots: &[PathBuf], path: &Path| roots.iter().any(|r| path.starts_with(r));
        match &permission.access {
            Access::Read(path) => inside(&self.read, path),
            Access::Write(path) => inside(&self.write, path),
            Access::Net { host, port } => self
                .net
                .iter()
                .any(|(h, p)| h == host && (p.is_none() || p == port)),
            Access::Run(program) => self.run.iter().any(|p| p == program),
        }
    }

    /// Adds what `permission`'s "always" grants: its folder, host or program.
    pub fn allow(&mut self, permission: &Permission) {
        let scope = &permission.scope;
        match permission.access {
            Access::Read(_) => self.read.push(PathBuf::from(scope)),
            Access::Write(_) => self.write.push(PathBuf::from(scope)),
            Access::Net { .. } => self.net.push((scope.clone(), None)),
            Access::Run(_) => self.run.push(scope.clone()),
        }
    }

    /// `permission` when these grants cover it, else its refusal.
    fn check(&self, permission: Permission) -> Result<Permission, String> {
        if self.covers(&permission) {
            Ok(permission)
        } else {
            Err(permission.refusal)
        }
    }

    /// The canonical form of `path` when reading it is granted.
    #[cfg(test)]
    fn readable(&self, tool: &str, path: &str) -> Result<PathBuf, String> {
        Ok(self.check(Self::read_access(tool, path)?)?.path())
    }

    /// The path to write when writing `path` is granted.
    #[cfg(test)]
    fn writable(&self, tool: &str, path: &str) -> Result<PathBuf, String> {
        Ok(self.check(Self::write_access(tool, path)?)?.path())
    }

    fn reachable(&self, tool: &str, url: &reqwest::Url) -> Result<(), String> {
        self.check(Self::net_access(tool, url)).map(drop)
    }

    #[cfg(test)]
    fn runnable(&self, program: &str) -> Result<(), String> {
        self.check(Self::run_access(program)).map(drop)
    }
}

/// The error of a call the grants refuse: what it may not do, and the flag to add.
fn refusal(tool: &str, what: &str, flag: &str, value: &str) -> String {
    format!(
        "`{tool}` may not {what}: run with --allow-{flag}={value} (or add it to `{flag}` in the [permissions] table of sap.toml)"
    )
}

/// What `asked` asks, when the grants allow it or, asked, the run's client does; the
/// refusal's error when neither does. Nothing is done before the answer.
async fn permitted(
    grants: &Grants,
    asked: Permission,
    client: Option<&dyn Client>,
) -> Result<Permission, String> {
    if grants.covers(&asked) {
        return Ok(asked);
    }
    let Some(client) = client else {
        return Err(asked.refusal);
    };
    match client.ask(asked.clone()).await {
        Answer::Once | Answer::Always => Ok(asked),
        Answer::Reject => Err(format!("{} (the user refused)", asked.refusal)),
    }
}

/// The folder to suggest granting for a refused path.
fn suggest_dir(target: &Path) -> String {
    let dir = if target.is_dir() {
        target
    } else {
        target.parent().unwrap_or(target)
    };
    dir.display().to_string()
}

/// Calls the standard tool `module::tool` with sap values.
pub async fn call(
    grants: &Grants,
    client: Option<&dyn Client>,
    module: &str,
    tool: &str,
    args: &[Value],
    ret: &TypeDesc,
    deadline: Option<Instant>,
) -> Result<Value, String> {
    let name = format!("{module}::{tool}");
    let text = |i: usize| -> Result<&str, String> {
        match args.get(i) {
            Some(Value::Str(s)) => Ok(s),
            _ => Err(format!("`{name}` takes a string as argument {}", i + 1)),
        }
    };
    let timeout = deadline
        .map(|d| d.saturating_duration_since(Instant::now()))
        .unwrap_or(Duration::from_secs(300));
    match (module, tool) {
        ("fs", "read") => {
            let asked = Grants::read_access(&name, text(0)?)?;
            let path = permitted(grants, asked, client).await?.path();
            let content = match client.filter(|c| c.reads_files()) {
                Some(c) => c.read_text(path.clone()).await,
                None => tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|e| e.to_string()),
            }
            .map_err(|e| format!("`{name}`: cannot read {}: {e}", path.display()))?;
            Ok(Value::str(&content))
        }
        ("fs", "write") => {
            let asked = Grants::write_access(&name, text(0)?)?;
            let path = permitted(grants, asked, client).await?.path();
            let content = text(1)?;
            match client.filter(|c| c.writes_files()) {
                Some(c) => c.write_text(path.clone(), content.to_owned()).await,
                None => tokio::fs::write(&path, content)
                    .await
                    .map_err(|e| e.to_string()),
            }
            .map_err(|e| format!("`{name}`: cannot write {}: {e}", path.display()))?;
            Ok(Value::Unit)
        }
        ("fs", "list") => {
            let asked = Grants::read_access(&name, text(0)?)?;
            let dir = permitted(grants, asked, client).await?.path();
            let mut entries = tokio::fs::read_dir(&dir)
                .await
                .map_err(|e| format!("`{name}`: cannot list {}: {e}", dir.display()))?;
            let mut names = Vec::new();
            while let Some(entry) = entries
                .next_entry()
                .await
                .map_err(|e| format!("`{name}`: cannot list {}: {e}", dir.display()))?
            {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(Value::List(std::sync::Arc::new(
                names.iter().map(|n| Value::str(n)).collect(),
            )))
        }
        ("http", "get") | ("http", "post") => {
            let url = reqwest::Url::parse(text(0)?)
                .map_err(|e| format!("`{name}`: `{}` is not a URL: {e}", text(0).unwrap_or("")))?;
            permitted(grants, Grants::net_access(&name, &url), client).await?;
            http_transport::install_crypto();
            // Each redirect must stay inside the grants too.
            let redirect_grants = grants.clone();
            let client = reqwest::Client::builder()
                .timeout(timeout.min(Duration::from_secs(60)))
                .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() > 5 {
                        attempt.error("too many redirects")
                    } else if redirect_grants.reachable("http", attempt.url()).is_err() {
                        attempt.stop()
                    } else {
                        attempt.follow()
                    }
                }))
                .build()
                .map_err(|e| format!("`{name}`: {e}"))?;
            let request = if tool == "get" {
                client.get(url.clone())
            } else {
                let body = args.get(1).map(Value::to_json).unwrap_or(JsonValue::Null);
                client
                    .post(url.clone())
                    .header("content-type", "application/json")
                    .body(body.to_string())
            };
            let response = request
                .send()
                .await
                .map_err(|e| format!("`{name}` {url}: {e}"))?;
            let status = response.status();
            let body = response
                .text()
                .await
                .map_err(|e| format!("`{name}` {url}: {e}"))?;
            if !status.is_success() {
                let cut: String = body.chars().take(200).collect();
                return Err(format!("`{name}` {url}: HTTP {status}: {cut}"));
            }
            if tool == "get" {
                Ok(Value::str(&body))
            } else {
                let json: JsonValue = serde_json::from_str(&body)
                    .map_err(|e| format!("`{name}` {url}: the answer is not JSON ({e})"))?;
                Ok(Value::Json(std::sync::Arc::new(json)))
            }
        }
        ("process", "run") => {
            let program = text(0)?;
            permitted(grants, Grants::run_access(program), client).await?;
            let argv: Vec<String> = match args.get(1) {
                Some(Value::List(items)) => items
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => Ok(s.to_string()),
                        _ => Err(format!("`{name}` takes a list of strings")),
                    })
                    .collect::<Result<_, _>>()?,
                _ => Vec::new(),
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(&argv)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            let output = tokio::time::timeout(timeout, cmd.output())
                .await
                .map_err(|_| format!("`{name}`: `{program}` did not finish before the time budget ended; it was stopped"))?
                .map_err(|e| format!("`{name}`: cannot run `{program}`: {e}"))?;
            let json = serde_json::json!({
                "status": output.status.code().unwrap_or(-1),
                "stdout": String::from_utf8_lossy(&output.stdout),
                "stderr": String::from_utf8_lossy(&output.stderr),
            });
            decode(ret, &json).map_err(|e| format!("`{name}`: {e}"))
        }
        _ => Err(format!("there is no standard tool `{name}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> test_support::Scratch {
        let dir = test_support::Scratch::new(&format!("grants-{name}"));
        std::fs::create_dir_all(dir.join("granted/sub")).unwrap();
        std::fs::write(dir.join("granted/sub/a.txt"), "inside").unwrap();
        std::fs::write(dir.join("secret.txt"), "outside").unwrap();
        dir
    }

    #[test]
    fn reads_inside_a_grant_and_refuses_every_escape() {
        let dir = folder("read");
        let mut g = Grants::default();
        Grants::add_dir(&mut g.read, "granted", &dir).unwrap();
        let inside = dir.join("granted/sub/a.txt");
        assert!(g.readable("fs::read", inside.to_str().unwrap()).is_ok());
        // `..` out of the grant.
        let dotdot = dir.join("granted/sub/../../secret.txt");
        let err = g
            .readable("fs::read", dotdot.to_str().unwrap())
            .unwrap_err();
        assert!(err.contains("--allow-read="), "{err}");
        // An absolute path elsewhere.
        assert!(g.readable("fs::read", "/etc/hostname").is_err());
        // A link inside the grant that points out of it.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("secret.txt"), dir.join("granted/link")).unwrap();
            let link = dir.join("granted/link");
            assert!(g.readable("fs::read", link.to_str().unwrap()).is_err());
            assert!(g.writable("fs::write", link.to_str().unwrap()).is_err());
        }
        // Writing needs its own grant.
        let err = g
            .writable("fs::write", dir.join("granted/new.txt").to_str().unwrap())
            .unwrap_err();
        assert!(err.contains("--allow-write="), "{err}");
        Grants::add_dir(&mut g.write, "granted", &dir).unwrap();
        assert!(
            g.writable("fs::write", dir.join("granted/new.txt").to_str().unwrap())
                .is_ok()
        );
        assert!(Grants::add_dir(&mut g.read, "no-such-folder", &dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hosts_and_programs_are_granted_by_name() {
        let mut g = Grants::default();
        g.add_net("api.example.com").unwrap();
        g.add_net("127.0.0.1:8080").unwrap();
        let ok = |u: &str| g.reachable("http::get", &reqwest::Url::parse(u).unwrap());
        assert!(ok("https://api.example.com/x").is_ok());
        assert!(ok("http://api.example.com:9999/x").is_ok());
        assert!(ok("http://127.0.0.1:8080/").is_ok());
        let err = ok("http://127.0.0.1:8081/").unwrap_err();
        assert!(err.contains("--allow-net=127.0.0.1:8081"), "{err}");
        assert!(ok("https://evil.example.com/").is_err());
        assert!(g.add_net("host:notaport").is_err());
        g.run.push("git".into());
        assert!(g.runnable("git").is_ok());
        assert!(
            g.runnable("/usr/bin/git")
                .unwrap_err()
                .contains("--allow-run=/usr/bin/git")
        );
    }
}

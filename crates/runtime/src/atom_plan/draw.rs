//! A plan drawn as a Graphviz DOT graph or a Mermaid flowchart.

use serde_json::Value as JsonValue;

use super::*;

/// The plan as a Graphviz digraph: an edge from each dependency to its dependent.
pub fn to_dot(plan: &Plan) -> String {
    let mut out = String::from("digraph plan {\n  rankdir=LR;\n");
    for atom in &plan.atoms {
        let shape = if atom.kind == AtomKind::Final {
            "doublecircle"
        } else {
            "box"
        };
        out.push_str(&format!(
            "  a{} [shape={shape}, label=\"{}\"];\n",
            atom.id,
            escape(&label(atom))
        ));
    }
    for atom in &plan.atoms {
        for d in &atom.depends_on {
            out.push_str(&format!("  a{d} -> a{};\n", atom.id));
        }
    }
    out.push_str("}\n");
    out
}

/// The plan as a Mermaid flowchart.
pub fn to_mermaid(plan: &Plan) -> String {
    let mut out = String::from("flowchart LR\n");
    for atom in &plan.atoms {
        // Mermaid has no backslash escapes; a quote is the entity `#quot;`.
        let text = label(atom).replace('"', "#quot;").replace('\n', " ");
        if atom.kind == AtomKind::Final {
            out.push_str(&format!("  a{}((\"{text}\"))\n", atom.id));
        } else {
            out.push_str(&format!("  a{}[\"{text}\"]\n", atom.id));
        }
    }
    for atom in &plan.atoms {
        for d in &atom.depends_on {
            out.push_str(&format!("  a{d} --> a{}\n", atom.id));
        }
    }
    out
}

fn label(atom: &Atom) -> String {
    let args: Vec<String> = atom
        .input
        .iter()
        .map(|(k, v)| format!("{k}={}", short(v)))
        .collect();
    format!("{}: {}({})", atom.id, atom.name, args.join(", "))
}

fn short(v: &JsonValue) -> String {
    match v {
        JsonValue::String(s) => match reference(s) {
            Some(r) => format!("@{r}"),
            None => format!("'{s}'"),
        },
        other => other.to_string(),
    }
}

/// A DOT string body.
fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c == '"' || c == '\\' {
                vec!['\\', c]
            } else if c == '\n' {
                vec!['\\', 'n']
            } else {
                vec![c]
            }
        })
        .collect()
}

//! The request each kind of call sends: the rendered context, the call-site instruction
//! and the schema of the answer, with the shape the answer is read in.

use std::sync::Arc;

use serde_json::Value as JsonValue;

use super::{AnswerShape, CallKind, Runtime, SYSTEM_PROMPT, WRAPPER};
use crate::context::Context;
use llm::LlmRequest;
use llm::schema::{self, ArmDesc};
use llm::types::{FieldDesc, ParamDesc, StructDesc, TypeDesc};

pub(super) fn synthetic_struct(
    name: &str,
    fields: Vec<(String, Option<String>, TypeDesc)>,
) -> TypeDesc {
    TypeDesc::Struct(Arc::new(StructDesc {
        name: name.to_owned(),
        doc: None,
        fields: fields
            .into_iter()
            .map(|(name, doc, ty)| FieldDesc { name, doc, ty })
            .collect(),
    }))
}

fn params_struct(name: &str, params: &[ParamDesc]) -> TypeDesc {
    synthetic_struct(
        name,
        params
            .iter()
            .map(|p| (p.name.clone(), p.doc.clone(), p.ty.clone()))
            .collect(),
    )
}

fn describe_params(params: &[ParamDesc], out: &mut String) {
    for p in params {
        out.push_str(&format!("\n- `{}` ({})", p.name, p.ty));
        if let Some(doc) = &p.doc {
            out.push_str(": ");
            out.push_str(&one_line(doc));
        }
    }
}

/// A doc comment as a phrase inside a sentence: one line, no final period.
fn one_line(doc: &str) -> String {
    doc.replace('\n', " ")
        .trim()
        .trim_end_matches('.')
        .to_owned()
}

/// How a condition's instruction ends: after "Decide `f` (its doc)".
pub use llm::DECIDE_ASK;

impl Runtime {
    /// The request and answer shape for an LLM function's result.
    pub fn produce_request(
        &self,
        ctx: &Context,
        function: &str,
        ty: &TypeDesc,
    ) -> (LlmRequest, AnswerShape) {
        let (schema, wrapped) = schema::value_schema(ty);
        let mut instruction =
            format!("Respond with the result of `{function}`: a value of type `{ty}`");
        if let Some(doc) = ty.doc() {
            instruction.push_str(&format!(" ({})", one_line(doc)));
        }
        instruction.push_str(if wrapped {
            ", as {\"value\": …}."
        } else {
            "."
        });
        let root = if wrapped {
            synthetic_struct(WRAPPER, vec![("value".to_owned(), None, ty.clone())])
        } else {
            ty.clone()
        };
        self.result_request(ctx, function, instruction, schema, root)
    }

    /// The request for the result of `function`, answered in `schema` and read as `root`.
    pub(super) fn result_request(
        &self,
        ctx: &Context,
        function: &str,
        instruction: String,
        schema: JsonValue,
        root: TypeDesc,
    ) -> (LlmRequest, AnswerShape) {
        let name = format!("{function}_result");
        self.request(
            ctx,
            instruction,
            name,
            schema,
            CallKind::Produce,
            root,
            Vec::new(),
        )
    }

    pub fn fill_args_request(
        &self,
        ctx: &Context,
        callee: &str,
        callee_doc: Option<&str>,
        params: &[ParamDesc],
    ) -> (LlmRequest, AnswerShape) {
        let mut instruction = format!("The program calls `{callee}`");
        if let Some(doc) = callee_doc {
            instruction.push_str(&format!(" ({})", one_line(doc)));
        }
        instruction.push_str(" and needs you to provide these arguments:");
        describe_params(params, &mut instruction);
        instruction.push_str("\nAnswer with one JSON field per argument.");
        let schema = schema::arguments_schema(params);
        let root = params_struct("arguments", params);
        self.request(
            ctx,
            instruction,
            format!("{callee}_arguments"),
            schema,
            CallKind::FillArgs,
            root,
            Vec::new(),
        )
    }

    pub fn choose_request(&self, ctx: &Context, arms: &[ArmDesc]) -> (LlmRequest, AnswerShape) {
        let mut instruction = "Choose one of these options and provide its arguments:".to_owned();
        for (i, arm) in arms.iter().enumerate() {
            instruction.push_str(&format!("\n{i}. call `{}`", arm.tool));
            if let Some(doc) = &arm.doc {
                instruction.push_str(&format!(" — {}", one_line(doc)));
            }
            if let Some(binding) = &arm.binding {
                instruction.push_str(&format!("; the result is used as `{binding}`"));
            }
            if arm.params.is_empty() {
                instruction.push_str("; no arguments");
            } else {
                instruction.push_str("; arguments:");
                let mut described = String::new();
                describe_params(&arm.params, &mut described);
                instruction.push_str(&described.replace("\n- ", "\n   - "));
            }
        }
        instruction
            .push_str("\nAnswer with {\"choice\": {\"option\": <number>, \"arguments\": {…}}}.");
        let schema = schema::choice_schema(arms);
        let arm_types: Vec<TypeDesc> = arms
            .iter()
            .map(|a| params_struct("arguments", &a.params))
            .collect();
        self.request(
            ctx,
            instruction,
            "choice".to_owned(),
            schema,
            CallKind::Choose,
            TypeDesc::Json,
            arm_types,
        )
    }

    /// A Boolean condition's request: "Decide `f` (its doc)", then [`DECIDE_ASK`].
    pub fn decide_request(
        &self,
        ctx: &Context,
        function: &str,
        doc: Option<&str>,
    ) -> (LlmRequest, AnswerShape) {
        let mut instruction = format!("Decide `{function}`");
        if let Some(doc) = doc {
            instruction.push_str(&format!(" ({})", one_line(doc)));
        }
        instruction.push_str(DECIDE_ASK);
        let root = synthetic_struct(
            "decision",
            vec![
                ("reason".to_owned(), None, TypeDesc::String),
                ("answer".to_owned(), None, TypeDesc::Bool),
            ],
        );
        self.request(
            ctx,
            instruction,
            format!("{function}_decision"),
            schema::decision_schema(),
            CallKind::Decide,
            root,
            Vec::new(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        ctx: &Context,
        instruction: String,
        schema_name: String,
        schema: JsonValue,
        kind: CallKind,
        root: TypeDesc,
        arms: Vec<TypeDesc>,
    ) -> (LlmRequest, AnswerShape) {
        let schema = Arc::new(schema);
        let context = ctx.render();
        let text = schema::text_budget(context.len() + instruction.len());
        let request = LlmRequest {
            system: Arc::from(SYSTEM_PROMPT),
            context,
            instruction,
            schema_name: schema_name
                .chars()
                .map(|c| {
                    if c.is_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect(),
            max_tokens: schema::output_budget(&schema, text),
            max_text_tokens: text,
            schema: schema.clone(),
            corrections: Vec::new(),
            order: crate::order::next_call(),
            // Walking the context costs; only the trace needs it.
            untrusted: self
                .trace
                .is_some()
                .then(|| ctx.untrusted_source())
                .flatten(),
        };
        (
            request,
            AnswerShape {
                kind,
                schema,
                root,
                arms,
            },
        )
    }
}

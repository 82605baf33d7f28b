//! The LLM call sites: the four kinds of model call as the engines call them (each told
//! to the observer, answered by a test's script when it has one), with the checks of
//! `trusted` parameters the run makes before asking.

use ir::{self, LlmSite, SiteKind, SrcSpan};
use llm::schema::ArmDesc;
use llm::types::ParamDesc;
use runtime::observe::{ModelCall, Place};
use runtime::{CallSite, Context, Runtime, RuntimeError, Value};

use super::script::{self, outcome, short};
use super::types::params_of;
use super::{ExecError, Host};

impl Host {
    fn call_site(&self, site: &LlmSite, ctx: &Context) -> CallSite {
        let span = site.span;
        let (file, line, column) = self.location(span);
        CallSite {
            function: site.function.clone(),
            file,
            line,
            column,
            span: (span.start, span.end),
            path: ctx.call_path(),
        }
    }

    fn runtime(&self, span: SrcSpan) -> Result<&Runtime, ExecError> {
        self.runtime.as_deref().ok_or_else(|| {
            ExecError::new(
                "this program calls the model, but no LLM provider is configured",
                Some(span),
            )
        })
    }

    /// The runtime for a site, or, in a test with no provider, the error that names the
    /// `given` the test lacks.
    fn runtime_for(&self, s: &LlmSite) -> Result<&Runtime, ExecError> {
        if self.testing && self.runtime.is_none() {
            let owner = self.function_name(s.owner);
            let used = self.lock_script().used(s.owner);
            let (what, fix) = match &s.kind {
                SiteKind::Produce { .. } | SiteKind::Decide => (
                    format!("the result of `{}`", s.subject),
                    format!(
                        "`given {0}(…) => …`, or `given {0} {{ … }}` with one more value",
                        s.subject
                    ),
                ),
                SiteKind::Fill { callee, .. } => (
                    format!("the `_` arguments of `{callee}` in `{owner}`"),
                    format!("`fill {callee}(…)` in `given {owner} {{ … }}`"),
                ),
                SiteKind::Choose { .. } => (
                    format!("a `select` clause in `{owner}`"),
                    format!("`select g(…)` in `given {owner} {{ … }}`"),
                ),
            };
            let given = if used > 0 {
                format!(" (its script for `{owner}` gave {used} answers, and has no more)")
            } else {
                String::new()
            };
            return Err(ExecError::new(
                format!(
                    "the model was asked for {what}, and the test scripts no answer{given}: add {fix}, or run with `--provider` or `--replay`"
                ),
                Some(s.span),
            ));
        }
        self.runtime(s.span)
    }

    pub(super) fn params(&self, params: &[ir::Param]) -> Vec<ParamDesc> {
        params_of(&self.types, params)
    }

    /// A model call at `s`, told to the observer (when there is one) as it starts and
    /// ends; `json` shows its value.
    fn observed<T>(
        &self,
        s: &LlmSite,
        kind: &'static str,
        call: impl FnOnce() -> Result<T, ExecError>,
        json: impl FnOnce(&T) -> serde_json::Value,
    ) -> Result<T, ExecError> {
        let Some(observer) = self.observer() else {
            return call();
        };
        let (file, line, _) = self.location(s.span);
        let id = runtime::observe::next_id();
        observer.model_started(&ModelCall {
            id,
            kind,
            subject: s.subject.clone(),
            place: Place {
                file,
                line,
                function: s.function.clone(),
            },
        });
        let result = call();
        match &result {
            Ok(v) => observer.model_finished(id, Ok(&json(v))),
            Err(e) => observer.model_finished(id, Err(&e.message)),
        }
        result
    }

    /// Waits for an LLM call ([`Host::wait`]).
    fn block<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, RuntimeError>> + Send,
        span: SrcSpan,
    ) -> Result<T, ExecError> {
        self.wait(f, Some(span))?
            .map_err(|e| ExecError::from_runtime(e, span))
    }

    /// The result of an LLM function; `schema`, for a `Json` result, is the JSON Schema
    /// the program passed for it.
    pub fn produce(
        &self,
        site: u32,
        ctx: &Context,
        schema: Option<&Value>,
    ) -> Result<Value, ExecError> {
        let s = &self.module.sites[site as usize];
        let rt = self.runtime_for(s)?;
        let SiteKind::Produce { ret } = &s.kind else {
            return Err(ExecError::new("internal: not a produce site", Some(s.span)));
        };
        let value = self.observed(
            s,
            "produce",
            || {
                if let Some(Value::Json(schema)) = schema {
                    let call_site = self.call_site(s, ctx);
                    self.block(
                        rt.produce_matching(&call_site, ctx, &s.subject, schema),
                        s.span,
                    )
                } else {
                    let ty = self.desc(ret);
                    self.block(
                        rt.produce(&self.call_site(s, ctx), ctx, &s.subject, &ty),
                        s.span,
                    )
                }
            },
            Value::to_json,
        )?;
        self.record(site, outcome(&value));
        Ok(value)
    }

    pub fn decide(&self, site: u32, ctx: &Context) -> Result<bool, ExecError> {
        let s = &self.module.sites[site as usize];
        let rt = self.runtime_for(s)?;
        let decided = self.observed(
            s,
            "decide",
            || {
                self.block(
                    rt.decide(&self.call_site(s, ctx), ctx, &s.subject, s.doc.as_deref()),
                    s.span,
                )
            },
            |b| serde_json::Value::Bool(*b),
        )?;
        self.record(site, decided.to_string());
        Ok(decided)
    }

    pub fn fill(&self, site: u32, ctx: &Context) -> Result<Vec<Value>, ExecError> {
        let s = &self.module.sites[site as usize];
        let SiteKind::Fill {
            callee,
            callee_doc,
            params,
        } = &s.kind
        else {
            return Err(ExecError::new("internal: not a fill site", Some(s.span)));
        };
        if self.testing
            && let Some((_, args)) = self.scripted_call(s, false, &[callee.as_str()])?
        {
            self.record(site, "answered".to_owned());
            return Ok(by_name(params, &args));
        }
        let rt = self.runtime_for(s)?;
        // The checker's E0134, once more at run time: the model does not fill a
        // `trusted` parameter from a context that holds untrusted data.
        if let Some(p) = params.iter().find(|p| p.trusted)
            && let Some(source) = ctx.untrusted_source()
        {
            return Err(ExecError::new(
                format!(
                    "refused: the model would fill `{callee}({}:)`, a `trusted` parameter, from a context that holds untrusted data (from {source})",
                    p.name
                ),
                Some(s.span),
            ));
        }
        let params = self.params(params);
        let filled = self.observed(
            s,
            "fill_args",
            || {
                self.block(
                    rt.fill_args(
                        &self.call_site(s, ctx),
                        ctx,
                        callee,
                        callee_doc.as_deref(),
                        &params,
                    ),
                    s.span,
                )
            },
            |values| serde_json::Value::Array(values.iter().map(Value::to_json).collect()),
        )?;
        self.record(site, "answered".to_owned());
        Ok(filled)
    }

    /// The script's next answer for a `select` or `fill` at `s`, if it has one for it.
    fn scripted_call(
        &self,
        s: &LlmSite,
        select: bool,
        callees: &[&str],
    ) -> Result<Option<script::ScriptedCall>, ExecError> {
        self.lock_script()
            .next_call(s.owner, select, callees)
            .map_err(|next| {
                let wanted = if select {
                    format!("a `select` clause ({})", callees.join(", "))
                } else {
                    format!("the `_` arguments of `{}`", callees.join(", "))
                };
                ExecError::new(
                    format!(
                        "the model is asked for {wanted} here, but the next answer the test scripts for `{}` is {next}: scripted answers are used in the order the program asks",
                        self.function_name(s.owner)
                    ),
                    Some(s.span),
                )
            })
    }

    pub fn choose(&self, site: u32, ctx: &Context) -> Result<(usize, Vec<Value>), ExecError> {
        let s = &self.module.sites[site as usize];
        let SiteKind::Choose { arms } = &s.kind else {
            return Err(ExecError::new("internal: not a choose site", Some(s.span)));
        };
        if self.testing {
            let tools: Vec<&str> = arms.iter().map(|a| a.tool.as_str()).collect();
            if let Some((callee, args)) = self.scripted_call(s, true, &tools)? {
                let index = arms
                    .iter()
                    .position(|a| short(&a.tool) == callee)
                    .unwrap_or(0);
                self.record(site, arms[index].tool.clone());
                return Ok((index, by_name(&arms[index].params, &args)));
            }
        }
        let rt = self.runtime_for(s)?;
        // The checker's E0134, once more at run time: untrusted data in the context
        // does not get to choose an action whose parameters are `trusted`.
        if let Some(arm) = arms.iter().find(|a| a.guarded)
            && let Some(source) = ctx.untrusted_source()
        {
            return Err(ExecError::new(
                format!(
                    "refused: this `select` offers `{}`, which has `trusted` parameters, to a model whose context holds untrusted data (from {source})",
                    arm.tool
                ),
                Some(s.span),
            ));
        }
        let arms: Vec<ArmDesc> = arms
            .iter()
            .map(|a| ArmDesc {
                tool: a.tool.clone(),
                doc: a.doc.clone(),
                binding: a.binding.clone(),
                params: self.params(&a.params),
            })
            .collect();
        let chosen = self.observed(
            s,
            "choose",
            || self.block(rt.choose(&self.call_site(s, ctx), ctx, &arms), s.span),
            |(arm, _)| {
                serde_json::Value::String(
                    arms.get(*arm).map(|a| a.tool.clone()).unwrap_or_default(),
                )
            },
        )?;
        if let Some(arm) = arms.get(chosen.0) {
            self.record(site, arm.tool.clone());
        }
        Ok(chosen)
    }
}

/// The values of `params` among a scripted call's arguments, by name.
fn by_name(params: &[ir::Param], args: &[(String, Value)]) -> Vec<Value> {
    params
        .iter()
        .map(|p| {
            args.iter()
                .find(|(name, _)| *name == p.name)
                .map_or(Value::Unit, |(_, v)| v.clone())
        })
        .collect()
}

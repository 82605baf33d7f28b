//! The runtime's descriptions of a program's types (`TypeDesc`), made once per host
//! from the IR: what answers are decoded into, what schemas are written from, what
//! tools are offered with.

use std::sync::Arc;

use ir::{Module, SiteKind, Type, TypeDef};
use llm::schema::{self, ArmDesc};
use llm::types::{EnumDesc, FieldDesc, ParamDesc, StructDesc, TypeDesc, VariantDesc};

pub(super) fn type_descs(module: &Module) -> Vec<TypeDesc> {
    // Two passes: first the names (so recursive types can refer to each other), then
    // the fields.
    let mut out: Vec<TypeDesc> = module
        .types
        .iter()
        .map(|t| match t {
            TypeDef::Struct { name, doc, .. } => TypeDesc::Struct(Arc::new(StructDesc {
                name: name.clone(),
                doc: doc.clone(),
                fields: Vec::new(),
            })),
            TypeDef::Enum {
                name,
                doc,
                variants,
            } => TypeDesc::Enum(Arc::new(EnumDesc {
                name: name.clone(),
                doc: doc.clone(),
                variants: variants
                    .iter()
                    .map(|(n, d)| VariantDesc {
                        name: n.clone(),
                        doc: d.clone(),
                    })
                    .collect(),
            })),
        })
        .collect();
    // Then each struct's fields, the structs it contains first, so a field's description
    // is complete when it is copied in (a type that contains itself keeps the name-only
    // description where it recurs).
    let mut state = vec![0u8; module.types.len()];
    for i in 0..module.types.len() {
        complete_struct(module, i, &mut out, &mut state);
    }
    out
}

fn complete_struct(module: &Module, i: usize, out: &mut [TypeDesc], state: &mut [u8]) {
    let TypeDef::Struct { name, doc, fields } = &module.types[i] else {
        return;
    };
    if state[i] != 0 {
        return;
    }
    state[i] = 1;
    fn structs_in(t: &Type, found: &mut Vec<usize>) {
        match t {
            Type::Struct(id) => found.push(*id as usize),
            Type::List(inner) | Type::Option(inner) => structs_in(inner, found),
            _ => {}
        }
    }
    let mut inner = Vec::new();
    fields.iter().for_each(|f| structs_in(&f.ty, &mut inner));
    for j in inner {
        if j < out.len() {
            complete_struct(module, j, out, state);
        }
    }
    let fields = fields
        .iter()
        .map(|f| FieldDesc {
            name: f.name.clone(),
            doc: f.doc.clone(),
            ty: desc_of(out, &f.ty),
        })
        .collect();
    out[i] = TypeDesc::Struct(Arc::new(StructDesc {
        name: name.clone(),
        doc: doc.clone(),
        fields,
    }));
    state[i] = 2;
}

pub(super) fn params_of(types: &[TypeDesc], params: &[ir::Param]) -> Vec<ParamDesc> {
    params
        .iter()
        .map(|p| ParamDesc {
            name: p.name.clone(),
            doc: p.doc.clone(),
            ty: desc_of(types, &p.ty),
        })
        .collect()
}

/// The schema each LLM site of `module` asks its answer in (the portable one, before a
/// provider writes it in its server's dialect), by site; `None` for a `Json` result
/// whose schema the program computes when it runs.
pub fn site_schemas(module: &Module) -> Vec<Option<serde_json::Value>> {
    let types = type_descs(module);
    module
        .sites
        .iter()
        .map(|site| match &site.kind {
            SiteKind::Produce { ret: Type::Json } => None,
            SiteKind::Produce { ret } => Some(schema::value_schema(&desc_of(&types, ret)).0),
            SiteKind::Fill { params, .. } => {
                Some(schema::arguments_schema(&params_of(&types, params)))
            }
            SiteKind::Choose { arms } => Some(schema::choice_schema(
                &arms
                    .iter()
                    .map(|a| ArmDesc {
                        tool: a.tool.clone(),
                        doc: a.doc.clone(),
                        binding: a.binding.clone(),
                        params: params_of(&types, &a.params),
                    })
                    .collect::<Vec<_>>(),
            )),
            SiteKind::Decide => Some(schema::decision_schema()),
        })
        .collect()
}

/// The runtime's description of `t`, a type of `module`: what an embedder decodes an
/// extern's result with (a host has the same as `Host::desc`).
pub fn type_desc(module: &Module, t: &Type) -> TypeDesc {
    desc_of(&type_descs(module), t)
}

pub(super) fn desc_of(types: &[TypeDesc], t: &Type) -> TypeDesc {
    match t {
        Type::Unit | Type::Tool | Type::Context => TypeDesc::Unit,
        Type::Bool => TypeDesc::Bool,
        Type::I32 => TypeDesc::I32,
        Type::I64 => TypeDesc::I64,
        Type::F64 => TypeDesc::F64,
        Type::Str => TypeDesc::String,
        Type::Json => TypeDesc::Json,
        Type::List(e) => TypeDesc::List(Box::new(desc_of(types, e))),
        Type::Option(e) => TypeDesc::Option(Box::new(desc_of(types, e))),
        Type::Struct(id) | Type::Enum(id) => {
            types.get(*id as usize).cloned().unwrap_or(TypeDesc::Unit)
        }
    }
}

//! Runtime descriptions of sap types, as `lower` will emit them: enough to build JSON
//! Schemas, to decode and validate the model's answers, and to describe parameters in
//! prompts. They are plain data shared behind `Arc`s.

use std::fmt;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub enum TypeDesc {
    I32,
    I64,
    F64,
    Bool,
    String,
    Unit,
    Json,
    List(Box<TypeDesc>),
    Option(Box<TypeDesc>),
    Struct(Arc<StructDesc>),
    Enum(Arc<EnumDesc>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct StructDesc {
    pub name: String,
    pub doc: Option<String>,
    pub fields: Vec<FieldDesc>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FieldDesc {
    pub name: String,
    pub doc: Option<String>,
    pub ty: TypeDesc,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EnumDesc {
    pub name: String,
    pub doc: Option<String>,
    pub variants: Vec<VariantDesc>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VariantDesc {
    pub name: String,
    pub doc: Option<String>,
}

/// A parameter the model fills: for `_` arguments and `select` arms.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDesc {
    pub name: String,
    pub doc: Option<String>,
    pub ty: TypeDesc,
}

impl fmt::Display for TypeDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeDesc::I32 => f.write_str("i32"),
            TypeDesc::I64 => f.write_str("i64"),
            TypeDesc::F64 => f.write_str("f64"),
            TypeDesc::Bool => f.write_str("Boolean"),
            TypeDesc::String => f.write_str("String"),
            TypeDesc::Unit => f.write_str("()"),
            TypeDesc::Json => f.write_str("Json"),
            TypeDesc::List(t) => write!(f, "List<{t}>"),
            TypeDesc::Option(t) => write!(f, "Option<{t}>"),
            TypeDesc::Struct(s) => f.write_str(&s.name),
            TypeDesc::Enum(e) => f.write_str(&e.name),
        }
    }
}

impl TypeDesc {
    /// Whether the schema of this type is a JSON object, so it can be the root of a
    /// structured-output schema without a wrapper.
    pub fn is_object(&self) -> bool {
        matches!(self, TypeDesc::Struct(_))
    }

    pub fn doc(&self) -> Option<&str> {
        match self {
            TypeDesc::Struct(s) => s.doc.as_deref(),
            TypeDesc::Enum(e) => e.doc.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `struct Point { x: i32, label: Option<String> }`, for the tests of what reads
    /// values of a type.
    pub(crate) fn point() -> TypeDesc {
        TypeDesc::Struct(Arc::new(StructDesc {
            name: "Point".into(),
            doc: None,
            fields: vec![
                FieldDesc {
                    name: "x".into(),
                    doc: None,
                    ty: TypeDesc::I32,
                },
                FieldDesc {
                    name: "label".into(),
                    doc: None,
                    ty: TypeDesc::Option(Box::new(TypeDesc::String)),
                },
            ],
        }))
    }
}

//! The pest grammar (`sap.pest`) compiled by pest_derive: the parser and its `Rule`
//! enum, kept apart so the driver, the AST builder and the error wording all depend on
//! it and not on each other.

#[derive(pest_derive::Parser)]
#[grammar = "sap.pest"]
pub(crate) struct SapParser;

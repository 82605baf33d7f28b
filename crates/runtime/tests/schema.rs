//! The portable schema profile, and decoding that checks what providers may not enforce.

use std::sync::Arc;

use llm::schema::{schema_of, value_schema};
use llm::types::{EnumDesc, FieldDesc, StructDesc, TypeDesc, VariantDesc};
use runtime::value::decode;
use serde_json::json;

fn finding() -> TypeDesc {
    TypeDesc::Struct(Arc::new(StructDesc {
        name: "Finding".to_owned(),
        doc: Some("One bug.".to_owned()),
        fields: vec![
            FieldDesc {
                name: "line".to_owned(),
                doc: Some("Where, if known.".to_owned()),
                ty: TypeDesc::Option(Box::new(TypeDesc::I64)),
            },
            FieldDesc {
                name: "level".to_owned(),
                doc: None,
                ty: TypeDesc::Enum(Arc::new(EnumDesc {
                    name: "Level".to_owned(),
                    doc: None,
                    variants: vec![
                        VariantDesc {
                            name: "Low".to_owned(),
                            doc: Some("Cosmetic.".to_owned()),
                        },
                        VariantDesc {
                            name: "High".to_owned(),
                            doc: None,
                        },
                    ],
                })),
            },
            FieldDesc {
                name: "tags".to_owned(),
                doc: None,
                ty: TypeDesc::List(Box::new(TypeDesc::String)),
            },
            FieldDesc {
                name: "raw".to_owned(),
                doc: None,
                ty: TypeDesc::Json,
            },
        ],
    }))
}

#[test]
fn structs_are_closed_objects_with_every_field_required() {
    let s = schema_of(&finding());
    assert_eq!(s["type"], "object");
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["required"], json!(["line", "level", "tags", "raw"]));
    assert_eq!(s["description"], "One bug.");
    assert_eq!(
        s["properties"]["line"],
        json!({ "type": ["integer", "null"], "description": "Where, if known." })
    );
    assert_eq!(
        s["properties"]["level"],
        json!({ "type": "string", "enum": ["Low", "High"], "description": "Low: Cosmetic." })
    );
    assert_eq!(
        s["properties"]["tags"],
        json!({ "type": "array", "items": { "type": "string" } })
    );
    assert_eq!(
        s["properties"]["raw"]["type"], "string",
        "JSON travels as text"
    );
}

#[test]
fn optional_objects_are_a_union_with_null() {
    let s = schema_of(&TypeDesc::Option(Box::new(finding())));
    assert_eq!(s["anyOf"][1], json!({ "type": "null" }));
    assert_eq!(s["anyOf"][0]["type"], "object");
}

#[test]
fn scalars_are_wrapped_at_the_root() {
    let (s, wrapped) = value_schema(&TypeDesc::I32);
    assert!(wrapped);
    assert_eq!(
        s,
        json!({
            "type": "object",
            "properties": { "value": { "type": "integer", "minimum": i32::MIN, "maximum": i32::MAX } },
            "required": ["value"],
            "additionalProperties": false,
        })
    );
    let (s, wrapped) = value_schema(&finding());
    assert!(!wrapped);
    assert_eq!(s["type"], "object");
}

#[test]
fn decoding_checks_ranges_enums_and_fields() {
    let ok = decode(
        &finding(),
        &json!({ "line": null, "level": "High", "tags": [], "raw": "{\"a\": [1]}" }),
    )
    .unwrap();
    assert_eq!(
        ok.to_json(),
        json!({ "line": null, "level": "High", "tags": [], "raw": { "a": [1] } })
    );
    let err = |j| decode(&finding(), &j).unwrap_err().to_string();
    assert_eq!(
        err(json!({ "line": 1, "level": "Critical", "tags": [], "raw": "1" })),
        "at `level`: `Critical` is not one of \"Low\", \"High\""
    );
    assert_eq!(
        err(json!({ "line": 1, "level": "Low", "raw": "1" })),
        "at `tags`: this required field is missing"
    );
    assert_eq!(
        err(json!({ "line": 1, "level": "Low", "tags": [3], "raw": "1" })),
        "at `tags[0]`: expected a string, found a number"
    );
    assert_eq!(
        err(json!({ "line": 1, "level": "Low", "tags": [], "raw": "1", "extra": 1 })),
        "unexpected field `extra` in Finding"
    );
    assert_eq!(
        decode(&TypeDesc::I32, &json!(2147483648i64))
            .unwrap_err()
            .to_string(),
        "2147483648 is outside the range of i32"
    );
    assert!(decode(&TypeDesc::I64, &json!(2.5)).is_err());
    assert!(
        decode(&TypeDesc::I64, &json!(2.0)).is_ok(),
        "an integer written as a float is exact"
    );
}

//! RFC 7386 JSON merge patches: the change between two JSON documents, and its application.
//!
//! A merge patch cannot set a value to `null` (null means "remove"), and it replaces arrays
//! whole; [`crate::context::EnvironmentContext`] serialises without nulls and keys its
//! environments by id, so its changes survive the round trip exactly.

use serde_json::{Map, Value};

/// The merge patch that turns `from` into `to`: changed members recursively for objects, a
/// `null` for each removed member, and `to` itself where either side is not an object.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            for (key, value) in new {
                match old.get(key) {
                    Some(previous) if previous == value => {}
                    Some(previous @ Value::Object(_)) if value.is_object() => {
                        patch.insert(key.clone(), merge_patch(previous, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

/// Applies `patch` to `target` as RFC 7386 section 2 describes.
pub fn apply_merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(changes) = patch else {
        return patch.clone();
    };
    let mut result = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (key, value) in changes {
        if value.is_null() {
            result.remove(key);
        } else {
            let current = result.get(key).cloned().unwrap_or(Value::Null);
            result.insert(key.clone(), apply_merge_patch(&current, value));
        }
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of RFC 7386 appendix A that a patch made by `merge_patch` can express.
    #[test]
    fn context_merge_patch_rfc_examples_apply() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, result) in cases {
            assert_eq!(
                apply_merge_patch(&target, &patch),
                result,
                "{target} + {patch}"
            );
        }
    }

    #[test]
    fn context_merge_patch_is_minimal_and_round_trips() {
        let from = json!({"keep":1,"gone":2,"obj":{"x":1,"y":[1,2]},"list":[1]});
        let to = json!({"keep":1,"obj":{"x":1,"y":[1,3],"z":"new"},"list":[1],"added":true});
        let patch = merge_patch(&from, &to);
        assert_eq!(
            patch.to_string(),
            r#"{"added":true,"gone":null,"obj":{"y":[1,3],"z":"new"}}"#
        );
        assert_eq!(apply_merge_patch(&from, &patch), to);
        assert_eq!(merge_patch(&to, &to), json!({}));
    }
}

//! The JSONPath subset directives use to pick a value out of an API response (`responseValuePath`,
//! `valueJsonPath`, `propertyPath`): `$.a.b[0]`, `a.b[0]`, `a.b`, and quoted members `$['a.b']["c"]`.
//!
//! Grammar:
//!
//! ```text
//! path    = [ "$" ] [ name ] step*        (a leading name needs no dot; "$" alone is the whole response)
//! step    = "." name | "[" index "]" | "[" quoted "]"
//! name    = one or more characters other than '.', '[', ']'
//! index   = decimal digits
//! quoted  = "'" chars "'" | '"' chars '"'    (a backslash escapes the next character)
//! ```
//!
//! Architecture invariant: parsing and evaluation never panic, whatever the input.

use std::fmt;

use serde_json::Value;

/// One step of a [`ValuePath`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    /// An object member. Looked up exactly first, then ignoring ASCII case (ARM's property access ignores case).
    Member(String),
    /// An array element.
    Index(usize),
}

/// A parsed value path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePath {
    steps: Vec<PathStep>,
}

/// Why a path could not be parsed; `position` is a byte offset into the path text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value path at position {position}: {reason}")]
pub struct PathSyntaxError {
    pub position: usize,
    pub reason: &'static str,
}

/// Why evaluating a path against a value found nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathMiss {
    /// The value at `at` (a path prefix, e.g. `$.kubeconfigs[0]`) is null or missing.
    NullOrMissing { at: String },
    /// The value at `at` is not an object (for a member step) or not an array (for an index step).
    WrongType { at: String, expected: &'static str },
}

impl ValuePath {
    /// Parses a path.
    pub fn parse(text: &str) -> Result<Self, PathSyntaxError> {
        Parser { text, position: 0 }.parse()
    }

    /// The steps, outermost first.
    pub fn steps(&self) -> &[PathStep] {
        &self.steps
    }

    /// The value at this path. Null and missing values are misses: a directive that finds `null` has found
    /// nothing usable.
    pub fn evaluate<'v>(&self, root: &'v Value) -> Result<&'v Value, PathMiss> {
        let mut current = root;
        for (depth, step) in self.steps.iter().enumerate() {
            let next = match (step, current) {
                (PathStep::Member(name), Value::Object(map)) => map.get(name).or_else(|| {
                    map.iter()
                        .find(|(key, _)| key.eq_ignore_ascii_case(name))
                        .map(|(_, value)| value)
                }),
                (PathStep::Index(index), Value::Array(items)) => items.get(*index),
                (PathStep::Member(_), _) => {
                    return Err(PathMiss::WrongType {
                        at: self.prefix(depth),
                        expected: "an object",
                    });
                }
                (PathStep::Index(_), _) => {
                    return Err(PathMiss::WrongType {
                        at: self.prefix(depth),
                        expected: "an array",
                    });
                }
            };
            match next {
                None | Some(Value::Null) => {
                    return Err(PathMiss::NullOrMissing {
                        at: self.prefix(depth + 1),
                    });
                }
                Some(value) => current = value,
            }
        }
        if current.is_null() {
            return Err(PathMiss::NullOrMissing { at: "$".into() });
        }
        Ok(current)
    }

    /// The first `steps` steps, formatted.
    fn prefix(&self, steps: usize) -> String {
        Self {
            steps: self.steps[..steps.min(self.steps.len())].to_vec(),
        }
        .to_string()
    }
}

impl fmt::Display for ValuePath {
    /// The canonical form: `$`, then `.name` for plain names and `['...']` for names that need quoting.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for step in &self.steps {
            match step {
                PathStep::Index(index) => write!(f, "[{index}]")?,
                PathStep::Member(name) if is_plain_name(name) => write!(f, ".{name}")?,
                PathStep::Member(name) => {
                    f.write_str("['")?;
                    for c in name.chars() {
                        if c == '\'' || c == '\\' {
                            f.write_str("\\")?;
                        }
                        write!(f, "{c}")?;
                    }
                    f.write_str("']")?;
                }
            }
        }
        Ok(())
    }
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('$')
        && !name
            .chars()
            .any(|c| matches!(c, '.' | '[' | ']' | '\'' | '"' | '\\') || c.is_whitespace())
}

struct Parser<'t> {
    text: &'t str,
    position: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.position..]
    }

    fn error(&self, reason: &'static str) -> PathSyntaxError {
        PathSyntaxError {
            position: self.position,
            reason,
        }
    }

    fn parse(mut self) -> Result<ValuePath, PathSyntaxError> {
        let mut steps = Vec::new();
        if self.text.trim().is_empty() {
            return Err(self.error("the path is empty"));
        }
        if self.rest().starts_with('$') {
            self.position += 1;
        } else if !self.rest().starts_with('[') {
            steps.push(PathStep::Member(self.name()?));
        }
        while let Some(c) = self.rest().chars().next() {
            match c {
                '.' => {
                    self.position += 1;
                    steps.push(PathStep::Member(self.name()?));
                }
                '[' => {
                    self.position += 1;
                    steps.push(self.bracket()?);
                }
                _ => return Err(self.error("expected '.' or '['")),
            }
        }
        Ok(ValuePath { steps })
    }

    fn name(&mut self) -> Result<String, PathSyntaxError> {
        let length = self
            .rest()
            .find(['.', '[', ']'])
            .unwrap_or(self.rest().len());
        if length == 0 {
            return Err(self.error("expected a member name"));
        }
        let name = self.rest()[..length].to_owned();
        self.position += length;
        Ok(name)
    }

    fn bracket(&mut self) -> Result<PathStep, PathSyntaxError> {
        let step = match self.rest().chars().next() {
            Some(quote @ ('\'' | '"')) => {
                self.position += 1;
                let mut name = String::new();
                let mut escaped = false;
                loop {
                    let Some(c) = self.rest().chars().next() else {
                        return Err(self.error("unterminated quoted name"));
                    };
                    self.position += c.len_utf8();
                    if escaped {
                        name.push(c);
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == quote {
                        break;
                    } else {
                        name.push(c);
                    }
                }
                PathStep::Member(name)
            }
            Some(c) if c.is_ascii_digit() => {
                let length = self
                    .rest()
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(self.rest().len());
                let index = self.rest()[..length]
                    .parse()
                    .map_err(|_| self.error("the index is too large"))?;
                self.position += length;
                PathStep::Index(index)
            }
            _ => return Err(self.error("expected an index or a quoted name after '['")),
        };
        if !self.rest().starts_with(']') {
            return Err(self.error("expected ']'"));
        }
        self.position += 1;
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn steps(text: &str) -> Vec<PathStep> {
        ValuePath::parse(text).unwrap().steps
    }

    fn member(name: &str) -> PathStep {
        PathStep::Member(name.into())
    }

    #[test]
    fn accepted_forms() {
        let expected = vec![member("kubeconfigs"), PathStep::Index(0), member("value")];
        assert_eq!(steps("kubeconfigs[0].value"), expected);
        assert_eq!(steps("$.kubeconfigs[0].value"), expected);
        assert_eq!(steps("$['kubeconfigs'][0][\"value\"]"), expected);
        assert_eq!(steps("a.b"), vec![member("a"), member("b")]);
        assert_eq!(steps("$"), vec![]);
        assert_eq!(steps("[2]"), vec![PathStep::Index(2)]);
        assert_eq!(steps("$['a.b\\'c']"), vec![member("a.b'c")]);
    }

    #[test]
    fn rejected_forms() {
        for (text, position) in [
            ("", 0),
            ("a..b", 2),
            ("a[", 2),
            ("a[x]", 2),
            ("a[1", 3),
            ("a['b", 4),
            ("$a", 1),
            ("a]", 1),
            ("a[99999999999999999999999]", 2),
        ] {
            let error = ValuePath::parse(text).unwrap_err();
            assert_eq!(error.position, position, "{text}: {error}");
        }
    }

    #[test]
    fn display_is_canonical_and_reparses() {
        let path = ValuePath::parse("kubeconfigs[0]['a.b'].value").unwrap();
        assert_eq!(path.to_string(), "$.kubeconfigs[0]['a.b'].value");
        assert_eq!(ValuePath::parse(&path.to_string()).unwrap(), path);
    }

    #[test]
    fn evaluation() {
        let response =
            json!({"kubeconfigs": [{"name": "admin", "value": "ZGF0YQ=="}], "empty": null});
        let get = |text: &str| ValuePath::parse(text).unwrap().evaluate(&response).cloned();
        assert_eq!(get("kubeconfigs[0].value"), Ok(json!("ZGF0YQ==")));
        assert_eq!(
            get("KubeConfigs[0].Value"),
            Ok(json!("ZGF0YQ==")),
            "members match ignoring case"
        );
        assert_eq!(
            get("kubeconfigs[1].value"),
            Err(PathMiss::NullOrMissing {
                at: "$.kubeconfigs[1]".into()
            })
        );
        assert_eq!(
            get("empty"),
            Err(PathMiss::NullOrMissing {
                at: "$.empty".into()
            })
        );
        assert_eq!(
            get("kubeconfigs.value"),
            Err(PathMiss::WrongType {
                at: "$.kubeconfigs".into(),
                expected: "an object"
            })
        );
        assert_eq!(
            ValuePath::parse("$").unwrap().evaluate(&Value::Null),
            Err(PathMiss::NullOrMissing { at: "$".into() })
        );
    }

    /// The paths the deployment engine read before it shared this parser (its own `value_at_path`) mean the same.
    #[test]
    fn the_engines_former_paths_mean_the_same() {
        let doc = json!({"kubeconfigs": [{"name": "a", "value": "xyz"}], "Weird": {"k.x": 1}});
        let get = |text: &str| ValuePath::parse(text).unwrap().evaluate(&doc).cloned();
        assert_eq!(get("kubeconfigs[0].value"), Ok(json!("xyz")));
        assert_eq!(get("$.kubeconfigs[0].name"), Ok(json!("a")));
        assert_eq!(get("weird['k.x']"), Ok(json!(1)));
        assert!(get("kubeconfigs[3]").is_err());
        assert_eq!(get("$"), Ok(doc.clone()), "'$' is the whole response");
    }
}

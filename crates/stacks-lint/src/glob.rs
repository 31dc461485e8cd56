//! File-name globs for rules-file overrides: `*`, `**`, `?`, `[abc]`/`[!abc]` and `{a,b}`, matched against `/`
//! separated paths.
//!
//! A pattern without a `/` matches the file name alone (so `*.stack.json` matches `a/b/x.stack.json`, as the
//! `.gitignore`-style overrides in seed 000 read); a pattern with a `/` matches the whole path, with a leading `./`
//! or `/` ignored. `*` and `?` never match `/`; `**` matches any number of whole path segments.

/// A compiled glob pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
    /// Expanded `{a,b}` alternatives.
    alternatives: Vec<Vec<Token>>,
    whole_path: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`
    One,
    /// `*`
    Star,
    /// `**` as a whole segment (`**/` or `/**`)
    AnyDirs,
    Class {
        negated: bool,
        items: Vec<ClassItem>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ClassItem {
    Char(char),
    Range(char, char),
}

/// Why a pattern is not a valid glob.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("unclosed '[' in the file pattern '{0}'")]
    UnclosedClass(String),
    #[error("unclosed '{{' in the file pattern '{0}'")]
    UnclosedBrace(String),
    #[error("the file pattern '{0}' has too many '{{a,b}}' alternatives")]
    TooManyAlternatives(String),
}

/// Upper bound on `{a,b}` expansions, so a hostile pattern cannot blow up.
const MAX_ALTERNATIVES: usize = 64;

impl Glob {
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        let trimmed = pattern
            .trim()
            .trim_start_matches("./")
            .trim_start_matches('/');
        let expanded = expand_braces(trimmed, pattern)?;
        let mut alternatives = Vec::with_capacity(expanded.len());
        for alt in &expanded {
            alternatives.push(tokenize(alt, pattern)?);
        }
        Ok(Glob {
            pattern: pattern.to_string(),
            alternatives,
            whole_path: trimmed.contains('/'),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// True when `path` (either separator) matches.
    pub fn matches(&self, path: &str) -> bool {
        let normalized = path.replace('\\', "/");
        let normalized = normalized.trim_start_matches("./");
        let subject: Vec<char> = if self.whole_path {
            normalized.trim_start_matches('/').chars().collect()
        } else {
            normalized
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .chars()
                .collect()
        };
        self.alternatives
            .iter()
            .any(|tokens| match_tokens(tokens, &subject))
    }
}

fn expand_braces(s: &str, original: &str) -> Result<Vec<String>, GlobError> {
    let Some(open) = s.find('{') else {
        return Ok(vec![s.to_string()]);
    };
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return Err(GlobError::UnclosedBrace(original.to_string()));
    };
    let (head, inner, tail) = (&s[..open], &s[open + 1..close], &s[close + 1..]);
    // Split the inner part on top-level commas.
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts {
        for rest in expand_braces(&format!("{part}{tail}"), original)? {
            out.push(format!("{head}{rest}"));
            if out.len() > MAX_ALTERNATIVES {
                return Err(GlobError::TooManyAlternatives(original.to_string()));
            }
        }
    }
    Ok(out)
}

fn tokenize(s: &str, original: &str) -> Result<Vec<Token>, GlobError> {
    let chars: Vec<char> = s.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let at_start = i == 0 || chars[i - 1] == '/';
                let at_end = i + 2 == chars.len() || chars[i + 2] == '/';
                if at_start && at_end {
                    tokens.push(Token::AnyDirs);
                    // `**/` consumes its slash: it stands for zero or more whole segments.
                    i += if i + 2 < chars.len() { 3 } else { 2 };
                } else {
                    tokens.push(Token::Star);
                    i += 2;
                }
            }
            '*' => {
                tokens.push(Token::Star);
                i += 1;
            }
            '?' => {
                tokens.push(Token::One);
                i += 1;
            }
            '[' => {
                let mut j = i + 1;
                let negated = matches!(chars.get(j), Some('!') | Some('^'));
                if negated {
                    j += 1;
                }
                let mut items = Vec::new();
                let mut first = true;
                loop {
                    let Some(&c) = chars.get(j) else {
                        return Err(GlobError::UnclosedClass(original.to_string()));
                    };
                    if c == ']' && !first {
                        break;
                    }
                    first = false;
                    if chars.get(j + 1) == Some(&'-')
                        && let Some(&hi) = chars.get(j + 2)
                        && hi != ']'
                    {
                        items.push(ClassItem::Range(c, hi));
                        j += 3;
                    } else {
                        items.push(ClassItem::Char(c));
                        j += 1;
                    }
                }
                tokens.push(Token::Class { negated, items });
                i = j + 1;
            }
            c => {
                tokens.push(Token::Literal(c));
                i += 1;
            }
        }
    }
    Ok(tokens)
}

fn class_matches(negated: bool, items: &[ClassItem], c: char) -> bool {
    let hit = items.iter().any(|item| match *item {
        ClassItem::Char(x) => x == c,
        ClassItem::Range(lo, hi) => lo <= c && c <= hi,
    });
    hit != negated && c != '/'
}

/// Backtracking matcher; memoised on (token, position) so hostile patterns stay polynomial.
fn match_tokens(tokens: &[Token], subject: &[char]) -> bool {
    let mut memo = vec![None; (tokens.len() + 1) * (subject.len() + 1)];
    match_from(tokens, subject, 0, 0, &mut memo)
}

fn match_from(
    tokens: &[Token],
    subject: &[char],
    t: usize,
    s: usize,
    memo: &mut Vec<Option<bool>>,
) -> bool {
    let key = t * (subject.len() + 1) + s;
    if let Some(known) = memo[key] {
        return known;
    }
    let result = match tokens.get(t) {
        None => s == subject.len(),
        Some(Token::Literal(c)) => {
            subject.get(s) == Some(c) && match_from(tokens, subject, t + 1, s + 1, memo)
        }
        Some(Token::One) => {
            subject.get(s).is_some_and(|&c| c != '/')
                && match_from(tokens, subject, t + 1, s + 1, memo)
        }
        Some(Token::Class { negated, items }) => {
            subject
                .get(s)
                .is_some_and(|&c| class_matches(*negated, items, c))
                && match_from(tokens, subject, t + 1, s + 1, memo)
        }
        Some(Token::Star) => {
            let mut end = s;
            loop {
                if match_from(tokens, subject, t + 1, end, memo) {
                    break true;
                }
                if end == subject.len() || subject[end] == '/' {
                    break false;
                }
                end += 1;
            }
        }
        Some(Token::AnyDirs) => {
            // Zero segments, or skip whole segments (up to and including a '/').
            let mut pos = s;
            loop {
                if match_from(tokens, subject, t + 1, pos, memo) {
                    break true;
                }
                match subject[pos..].iter().position(|&c| c == '/') {
                    Some(slash) => pos += slash + 1,
                    None => {
                        // A trailing `**` also matches the rest of the path.
                        break t + 1 == tokens.len();
                    }
                }
            }
        }
    };
    memo[key] = Some(result);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Glob::new(p).unwrap().matches(s)
    }

    #[test]
    fn file_name_patterns() {
        assert!(m("*.stack.json", "deploy/main.stack.json"));
        assert!(m("*.stack.json", "main.stack.json"));
        assert!(!m("*.stack.json", "main.json"));
        assert!(m("main.json", "a\\b\\main.json"));
        assert!(m("ma?n.json", "main.json"));
        assert!(m("[mn]ain.json", "nain.json"));
        assert!(!m("[!mn]ain.json", "nain.json"));
        assert!(m("*.{json,jsonc}", "x.jsonc"));
    }

    #[test]
    fn path_patterns() {
        assert!(m("modules/**/*.json", "modules/a/b/c.json"));
        assert!(m("modules/**/*.json", "modules/c.json"));
        assert!(m("./modules/*.json", "modules/c.json"));
        assert!(!m("modules/*.json", "modules/a/c.json"));
        assert!(m("**/*.json", "x.json"));
        assert!(m("modules/**", "modules/a/b"));
        assert!(!m("modules/**/*.json", "other/modules/c.json"));
    }

    #[test]
    fn bad_patterns() {
        assert!(matches!(
            Glob::new("[abc"),
            Err(GlobError::UnclosedClass(_))
        ));
        assert!(matches!(
            Glob::new("{a,b"),
            Err(GlobError::UnclosedBrace(_))
        ));
        assert!(matches!(
            Glob::new("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}"),
            Err(GlobError::TooManyAlternatives(_))
        ));
    }
}

//! Maps byte offsets to 1-based line and column numbers for diagnostics.

/// A 1-based line and column; the column counts characters, not bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineCol {
    pub line: u32,
    pub column: u32,
}

/// Line starts of a text, for converting offsets into positions.
#[derive(Clone, Debug)]
pub struct LineIndex {
    line_starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { line_starts }
    }

    /// The position of byte `offset` in `text` (the text this index was built from).
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = offset.min(text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let start = self.line_starts[line];
        let mut end = offset;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let column = text[start..end].trim_end_matches('\r').chars().count() + 1;
        LineCol {
            line: line as u32 + 1,
            column: column as u32,
        }
    }

    /// The text of 1-based line `line`, without its line break.
    pub fn line_text<'t>(&self, text: &'t str, line: u32) -> &'t str {
        let i = (line as usize).saturating_sub(1);
        let Some(&start) = self.line_starts.get(i) else {
            return "";
        };
        let end = self.line_starts.get(i + 1).copied().unwrap_or(text.len());
        text[start..end].trim_end_matches(['\n', '\r'])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let text = "ab\r\ncd\néf";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(idx.line_col(text, 4), LineCol { line: 2, column: 1 });
        assert_eq!(idx.line_col(text, 9), LineCol { line: 3, column: 2 });
        assert_eq!(idx.line_text(text, 1), "ab");
        assert_eq!(idx.line_text(text, 3), "éf");
    }
}

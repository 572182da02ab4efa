//! What `octopipe inspect` prints: the stages, or one stage's property table, with long cells
//! wrapped inside their columns so that no line passes the width asked for.

use super::props::{PropType, NAME_PROP};
use super::registry::Registry;

/// The width `inspect` wraps to where no terminal says its own (output to a pipe or a file).
pub const INSPECT_WIDTH: usize = 100;

/// The narrowest a table's last column is made, however narrow the width asked for.
const MIN_LAST: usize = 20;

impl Registry {
    /// What `octopipe inspect` prints, at most [`INSPECT_WIDTH`] columns wide: every stage with
    /// its role and doc, or one stage's properties (type with its range, default, doc), like
    /// gst-inspect-1.0. `None` for an unknown stage.
    pub fn inspect(&self, stage: Option<&str>) -> Option<String> {
        self.inspect_width(stage, INSPECT_WIDTH)
    }

    /// [`Registry::inspect`] at most `width` columns wide (a terminal's): a cell longer than
    /// its column goes on over the next lines, inside its column.
    pub fn inspect_width(&self, stage: Option<&str>, width: usize) -> Option<String> {
        let Some(name) = stage else {
            let roles: Vec<String> = self.decls.iter().map(|s| s.role.to_string()).collect();
            let rows: Vec<[&str; 3]> = self
                .decls
                .iter()
                .zip(&roles)
                .map(|(s, role)| [s.name, role, s.doc])
                .collect();
            return Some(table("", &[12, 11], &rows, width));
        };
        let s = self.get(name)?;
        let mut types = Vec::new();
        let mut props = Vec::new();
        for p in s.props.iter().chain([&NAME_PROP]) {
            if matches!(p.ty, PropType::Renamed { .. }) {
                continue;
            }
            types.push(match p.ty.range() {
                Some(range) => format!("{} {range}", p.ty.name()),
                None => p.ty.name(),
            });
            props.push(p);
        }
        let mut rows = vec![["property", "type", "default", "description"]];
        for (p, ty) in props.iter().zip(&types) {
            rows.push([p.name, ty.as_str(), p.default, p.doc]);
        }
        let mut out = String::new();
        for line in wrap(&format!("{} ({}): {}", s.name, s.role, s.doc), width) {
            out += &line;
            out.push('\n');
        }
        out.push('\n');
        out += &table("  ", &[16, 20, 26], &rows, width);
        Some(out)
    }
}

/// `rows` as a table: each line starts with `indent`, the columns but the last have the widths
/// `fixed`, the last takes what is left of `width` (at least [`MIN_LAST`]); a cell that does
/// not fit its column is wrapped inside it.
fn table<const N: usize>(
    indent: &str,
    fixed: &[usize],
    rows: &[[&str; N]],
    width: usize,
) -> String {
    let used = indent.len() + fixed.iter().map(|w| w + 1).sum::<usize>();
    let last = width.saturating_sub(used).max(MIN_LAST);
    let widths: Vec<usize> = fixed.iter().copied().chain([last]).collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<Vec<String>> = row.iter().zip(&widths).map(|(c, w)| wrap(c, *w)).collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1);
        for i in 0..height {
            let mut line = indent.to_string();
            for (cell, w) in cells.iter().zip(&widths) {
                let text = cell.get(i).map_or("", String::as_str);
                line += &format!("{text:<w$} ");
            }
            out += line.trim_end();
            out.push('\n');
        }
    }
    out
}

/// `text` in lines of at most `width` characters: broken at spaces, a word longer than a line
/// after its `|` or `,` (a choice, a list), and a piece longer still cut. Never no line.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let pieces = match word.chars().count() > width {
            true => split_after(word, &['|', ',']),
            false => vec![word],
        };
        for (i, piece) in pieces.into_iter().enumerate() {
            let gap = usize::from(i == 0 && !line.is_empty());
            if !line.is_empty() && line.chars().count() + gap + piece.chars().count() > width {
                lines.push(std::mem::take(&mut line));
            } else if gap == 1 {
                line.push(' ');
            }
            let mut rest: Vec<char> = piece.chars().collect();
            while line.is_empty() && rest.len() > width {
                lines.push(rest.drain(..width).collect());
            }
            line.extend(rest);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `word` in pieces, each ending after one of `marks` (the last with what is left).
fn split_after<'a>(word: &'a str, marks: &[char]) -> Vec<&'a str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in word.char_indices() {
        if marks.contains(&c) {
            pieces.push(&word[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < word.len() {
        pieces.push(&word[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_cells_wrap_inside_their_columns() {
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
        assert_eq!(wrap("a|bb|ccc|dddd", 6), ["a|bb|", "ccc|", "dddd"]);
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(wrap("", 5), [""]);
        let t = table("  ", &[4], &[["ab", "one two three four five six"]], 30);
        assert_eq!(t, "  ab   one two three four five\n       six\n");
    }
}

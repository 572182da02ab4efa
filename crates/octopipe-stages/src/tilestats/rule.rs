//! The keep rule of `tilestats`: a small expression over a tile's statistics.
//!
//! ```text
//! keep="mean>0.535"
//! keep="mean > 0.3 and std < 0.05 or above >= 0.9"
//! keep="not (max < 0.2) and (width >= 128 or height >= 128)"
//! ```
//!
//! - A **comparison** is `A OP B` where `OP` is one of `<`, `<=`, `>`, `>=`, `==`, `!=` and `A`, `B`
//!   are numbers (`0.535`, `-1`, `2e-3`) or properties of the tile: `mean`, `std`, `min`, `max`
//!   (after normalization), `above` (the fraction of its samples above `level`), `pixels`,
//!   `width`, `height`.
//! - Comparisons combine with `and`, `or` and `not`; `not` binds tightest, then `and`, then `or`;
//!   parentheses group. Words are lower case.
//!
//! A rule that does not parse is an error naming what is wrong and where (the column in the rule):
//! an unknown property (with the closest name), a missing operator or operand, an unbalanced
//! parenthesis, text left over.

use std::fmt;

use octopipe_core::frame::TileStats;

/// What a rule can ask about a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Property {
    /// Mean value after normalization.
    Mean,
    /// Standard deviation after normalization.
    Std,
    /// Smallest value after normalization.
    Min,
    /// Largest value after normalization.
    Max,
    /// Fraction of the samples above the level.
    Above,
    /// Samples in the tile.
    Pixels,
    /// Tile width.
    Width,
    /// Tile height.
    Height,
}

impl Property {
    /// Every property, by name.
    pub const ALL: [(&'static str, Property); 8] = [
        ("mean", Property::Mean),
        ("std", Property::Std),
        ("min", Property::Min),
        ("max", Property::Max),
        ("above", Property::Above),
        ("pixels", Property::Pixels),
        ("width", Property::Width),
        ("height", Property::Height),
    ];

    /// The property called `name`.
    pub fn parse(name: &str) -> Option<Property> {
        Property::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Property::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }

    /// Its value for a tile of `width`x`height` with `stats`.
    pub fn of(self, stats: &TileStats, width: u32, height: u32) -> f64 {
        match self {
            Property::Mean => stats.mean,
            Property::Std => stats.std,
            Property::Min => stats.min,
            Property::Max => stats.max,
            Property::Above => stats.above,
            Property::Pixels => stats.pixels as f64,
            Property::Width => f64::from(width),
            Property::Height => f64::from(height),
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// One side of a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Operand {
    Number(f64),
    Property(Property),
}

/// A parsed rule ([`Rule::parse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule(Node);

/// The parsed expression.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// `a OP b`.
    Compare(Operand, Op, Operand),
    /// Both.
    And(Box<Node>, Box<Node>),
    /// Either.
    Or(Box<Node>, Box<Node>),
    /// Not.
    Not(Box<Node>),
}

/// Why a rule does not parse: the message and where in the rule (1-based column and length, in
/// characters).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleError {
    /// What is wrong.
    pub message: String,
    /// Where it starts (1-based, in characters).
    pub column: usize,
    /// How many characters it takes (at least 1).
    pub len: usize,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (column {})", self.message, self.column)
    }
}

impl Rule {
    /// Parse `text`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let tokens = lex(text)?;
        let mut p = Parser {
            tokens: &tokens,
            at: 0,
            end: text.chars().count() + 1,
        };
        if tokens.is_empty() {
            return Err(err(
                1,
                "the rule is empty: expected a comparison such as mean>0.5",
            ));
        }
        let node = p.or()?;
        if let Some(t) = p.peek() {
            return Err(err_token(
                t,
                format!(
                    "'{}' is left over after a complete rule: join comparisons with and/or",
                    t.text
                ),
            ));
        }
        Ok(Rule(node))
    }

    /// Whether a tile of `width`x`height` with `stats` passes.
    pub fn keeps(&self, stats: &TileStats, width: u32, height: u32) -> bool {
        self.0.keeps(stats, width, height)
    }
}

impl Node {
    fn keeps(&self, stats: &TileStats, width: u32, height: u32) -> bool {
        let value = |o: &Operand| match *o {
            Operand::Number(v) => v,
            Operand::Property(p) => p.of(stats, width, height),
        };
        match self {
            Node::Compare(a, op, b) => {
                let (a, b) = (value(a), value(b));
                match op {
                    Op::Lt => a < b,
                    Op::Le => a <= b,
                    Op::Gt => a > b,
                    Op::Ge => a >= b,
                    Op::Eq => a == b,
                    Op::Ne => a != b,
                }
            }
            Node::And(a, b) => a.keeps(stats, width, height) && b.keeps(stats, width, height),
            Node::Or(a, b) => a.keeps(stats, width, height) || b.keeps(stats, width, height),
            Node::Not(a) => !a.keeps(stats, width, height),
        }
    }
}

/// An error about `column` of the rule.
fn err(column: usize, message: impl Into<String>) -> RuleError {
    RuleError {
        message: message.into(),
        column,
        len: 1,
    }
}

/// An error about token `t`.
fn err_token(t: &Token, message: impl Into<String>) -> RuleError {
    RuleError {
        len: t.text.chars().count().max(1),
        ..err(t.column, message)
    }
}

/// A token: its text and 1-based column.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    column: usize,
}

/// Split into words, numbers, operators and parentheses.
fn lex(text: &str) -> Result<Vec<Token>, RuleError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '(' || c == ')' {
            i += 1;
        } else if "<>=!".contains(c) {
            i += 1;
            if chars.get(i) == Some(&'=') {
                i += 1;
            }
        } else if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' || c == '+' {
            // A word or a number (with its exponent's sign): up to the next space, operator or
            // parenthesis.
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                let exponent_sign =
                    (d == '-' || d == '+') && matches!(chars[i - 1], 'e' | 'E') && i > start + 1;
                if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
        } else {
            return Err(err(start + 1, format!("unexpected character '{c}'")));
        }
        tokens.push(Token {
            text: chars[start..i].iter().collect(),
            column: start + 1,
        });
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    /// The column just past the rule, for "expected ... at the end" messages.
    end: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<&Token> {
        let t = self.tokens.get(self.at);
        self.at += 1;
        t
    }

    fn column(&self) -> usize {
        self.peek().map_or(self.end, |t| t.column)
    }

    fn or(&mut self) -> Result<Node, RuleError> {
        let mut rule = self.and()?;
        while self.peek().is_some_and(|t| t.text == "or") {
            self.at += 1;
            rule = Node::Or(Box::new(rule), Box::new(self.and()?));
        }
        Ok(rule)
    }

    fn and(&mut self) -> Result<Node, RuleError> {
        let mut rule = self.not()?;
        while self.peek().is_some_and(|t| t.text == "and") {
            self.at += 1;
            rule = Node::And(Box::new(rule), Box::new(self.not()?));
        }
        Ok(rule)
    }

    fn not(&mut self) -> Result<Node, RuleError> {
        if self.peek().is_some_and(|t| t.text == "not") {
            self.at += 1;
            return Ok(Node::Not(Box::new(self.not()?)));
        }
        if self.peek().is_some_and(|t| t.text == "(") {
            let open = self.column();
            self.at += 1;
            let rule = self.or()?;
            match self.next() {
                Some(t) if t.text == ")" => return Ok(rule),
                _ => {
                    return Err(err(
                        open,
                        "this '(' is never closed: expected ')' after its rule",
                    ))
                }
            }
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Node, RuleError> {
        let a = self.operand()?;
        let column = self.column();
        let Some(t) = self.next() else {
            return Err(err(
                column,
                "expected a comparison (<, <=, >, >=, ==, !=) at the end of the rule",
            ));
        };
        let op = match t.text.as_str() {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            other => {
                return Err(err_token(
                    t,
                    format!("expected a comparison (<, <=, >, >=, ==, !=), found '{other}'"),
                ))
            }
        };
        let b = self.operand()?;
        Ok(Node::Compare(a, op, b))
    }

    fn operand(&mut self) -> Result<Operand, RuleError> {
        let column = self.column();
        let Some(t) = self.next() else {
            return Err(err(
                column,
                "expected a number or a property at the end of the rule",
            ));
        };
        let t = t.clone();
        let text = t.text.as_str();
        if let Some(p) = Property::parse(text) {
            return Ok(Operand::Property(p));
        }
        if let Ok(v) = text.parse::<f64>() {
            if v.is_finite() {
                return Ok(Operand::Number(v));
            }
        }
        let names = Property::ALL.iter().map(|(n, _)| *n);
        let starts_like_a_name = text.starts_with(|c: char| c.is_ascii_alphabetic());
        let message = if starts_like_a_name && !matches!(text, "and" | "or" | "not") {
            let hint = octopipe_core::description::closest(text, names.clone())
                .map(|c| format!("did you mean '{c}'? "))
                .unwrap_or_default();
            format!(
                "unknown property '{text}' ({hint}properties: {})",
                names.collect::<Vec<_>>().join(", ")
            )
        } else {
            format!("expected a number or a property, found '{text}'")
        };
        Err(err_token(&t, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::frame::PixelSums;

    fn stats(mean: f64, std: f64, above: f64) -> TileStats {
        TileStats {
            pixels: 100,
            sums: PixelSums::EMPTY,
            mean,
            std,
            min: 0.0,
            max: 1.0,
            above,
            kept: false,
        }
    }

    #[test]
    fn rules_keep_what_they_say() {
        let keep = |rule: &str, s: &TileStats| Rule::parse(rule).unwrap().keeps(s, 10, 10);
        let bright = stats(0.6, 0.01, 0.9);
        let dark = stats(0.1, 0.2, 0.0);
        assert!(keep("mean>0.535", &bright) && !keep("mean>0.535", &dark));
        assert!(keep("0.535 < mean", &bright));
        // and binds tighter than or.
        let r = "mean > 0.5 and std > 0.1 or above >= 0.9";
        assert!(keep(r, &bright) && !keep(r, &dark));
        assert!(!keep("mean > 0.5 and (std > 0.1 or above < 0.5)", &bright));
        assert!(keep("not mean < 0.5", &bright) && !keep("not (mean > 0.5)", &bright));
        assert!(keep("pixels == 100 and width >= 10 and height != 3", &dark));
        assert!(keep("mean >= 1e-1", &dark) && !keep("mean > 2e-1", &dark));
        assert!(keep("std<=-1e-3 or std>= 0.2", &dark));
    }

    #[test]
    fn bad_rules_say_what_and_where() {
        let err = |rule: &str| Rule::parse(rule).unwrap_err();
        let e = err("meen>0.5");
        assert_eq!(e.column, 1);
        assert!(
            e.message
                .contains("unknown property 'meen' (did you mean 'mean'?"),
            "{e}"
        );
        assert!(
            e.message.contains("properties: mean, std, min, max, above"),
            "{e}"
        );
        let e = err("mean 0.5");
        assert_eq!(
            (e.column, e.message.contains("found '0.5'")),
            (6, true),
            "{e}"
        );
        let e = err("mean >");
        assert!(e.message.contains("at the end of the rule"), "{e}");
        let e = err("(mean > 0.5");
        assert_eq!(e.column, 1, "{e}");
        assert!(e.message.contains("never closed"), "{e}");
        let e = err("mean > 0.5 std < 1");
        assert!(e.message.contains("'std' is left over"), "{e}");
        assert!(err("").message.contains("empty"));
        let e = err("mean > 0.5 & std < 1");
        assert_eq!(
            (e.column, e.message.as_str()),
            (12, "unexpected character '&'")
        );
        let e = err("mean > and");
        assert!(
            e.message
                .contains("expected a number or a property, found 'and'"),
            "{e}"
        );
    }
}

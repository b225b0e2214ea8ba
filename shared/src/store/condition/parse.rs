//! DynamoDB's condition expression grammar, parsed into [`Expr`]: `OR`, `AND`, `NOT`,
//! parentheses, the comparators, `BETWEEN`, `IN`, and the functions `attribute_exists`,
//! `attribute_not_exists`, `attribute_type`, `begins_with`, `contains` and `size`, over
//! document paths (`#a.#b[0]`). Precedence as DynamoDB's: comparisons, then `NOT`, `AND`,
//! `OR`.

/// Why an expression is not one DynamoDB would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// A comparator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One step of a document path.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    /// An attribute or map key: a `#placeholder` or a bare name.
    Name(String),
    /// A list element.
    Index(usize),
}

/// What a comparison compares.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Operand {
    Path(Vec<Step>),
    /// A `:placeholder`.
    Value(String),
    Size(Vec<Step>),
}

/// A function that is a condition in itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Function {
    Exists,
    NotExists,
    Type,
    BeginsWith,
    Contains,
}

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Operand, Cmp, Operand),
    Between(Operand, Operand, Operand),
    In(Operand, Vec<Operand>),
    Call(Function, Vec<Operand>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Comma,
    Dot,
    OpenBracket,
    CloseBracket,
    Cmp(Cmp),
    /// `#name`, `:value` or a bare word, as written.
    Word(String),
    Number(usize),
}

fn tokens(text: &str) -> Result<Vec<Token>, ParseError> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let (token, width) = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            ',' => (Token::Comma, 1),
            '.' => (Token::Dot, 1),
            '[' => (Token::OpenBracket, 1),
            ']' => (Token::CloseBracket, 1),
            '=' => (Token::Cmp(Cmp::Eq), 1),
            '<' if next == Some('>') => (Token::Cmp(Cmp::Ne), 2),
            '<' if next == Some('=') => (Token::Cmp(Cmp::Le), 2),
            '<' => (Token::Cmp(Cmp::Lt), 1),
            '>' if next == Some('=') => (Token::Cmp(Cmp::Ge), 2),
            '>' => (Token::Cmp(Cmp::Gt), 1),
            c if c.is_ascii_digit() => {
                let len = chars[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                let digits: String = chars[i..i + len].iter().collect();
                let n = digits
                    .parse()
                    .map_err(|_| ParseError(format!("index `{digits}` is too large")))?;
                (Token::Number(n), len)
            }
            '#' | ':' | '_' => word(&chars[i..])?,
            c if c.is_ascii_alphabetic() => word(&chars[i..])?,
            c => return Err(ParseError(format!("unexpected `{c}` at {i}"))),
        };
        out.push(token);
        i += width;
    }
    Ok(out)
}

fn word(chars: &[char]) -> Result<(Token, usize), ParseError> {
    let sigil = usize::from(matches!(chars[0], '#' | ':'));
    let len = chars[sigil..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
        .count();
    if len == 0 {
        return Err(ParseError(format!("`{}` names nothing", chars[0])));
    }
    let text: String = chars[..sigil + len].iter().collect();
    Ok((Token::Word(text), sigil + len))
}

/// Parses `text`, or says where it is not DynamoDB's language.
pub(super) fn parse(text: &str) -> Result<Expr, ParseError> {
    let mut parser = Parser {
        tokens: tokens(text)?,
        at: 0,
    };
    let expr = parser.or()?;
    match parser.peek() {
        None => Ok(expr),
        Some(t) => Err(ParseError(format!(
            "unexpected {t:?} after a whole condition"
        ))),
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn expect(&mut self, token: Token) -> Result<(), ParseError> {
        match self.next() {
            Some(t) if t == token => Ok(()),
            other => Err(ParseError(format!("expected {token:?}, found {other:?}"))),
        }
    }

    /// Whether the next token is the keyword `keyword` (any case); takes it if so.
    fn keyword(&mut self, keyword: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(keyword));
        if found {
            self.at += 1;
        }
        found
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        while self.keyword("OR") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.not()?;
        while self.keyword("AND") {
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.keyword("NOT") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            let inner = self.or()?;
            self.expect(Token::Close)?;
            return Ok(inner);
        }
        if let Some(function) = self.function() {
            self.expect(Token::Open)?;
            let mut args = vec![self.operand()?];
            while self.peek() == Some(&Token::Comma) {
                self.at += 1;
                args.push(self.operand()?);
            }
            self.expect(Token::Close)?;
            let arity = if matches!(function, Function::Exists | Function::NotExists) {
                1
            } else {
                2
            };
            if args.len() != arity || !matches!(args[0], Operand::Path(_)) {
                return Err(ParseError(format!(
                    "{function:?} takes a path and {} more",
                    arity - 1
                )));
            }
            return Ok(Expr::Call(function, args));
        }
        let left = self.operand()?;
        if self.keyword("BETWEEN") {
            let low = self.operand()?;
            if !self.keyword("AND") {
                return Err(ParseError("BETWEEN without AND".into()));
            }
            return Ok(Expr::Between(left, low, self.operand()?));
        }
        if self.keyword("IN") {
            self.expect(Token::Open)?;
            let mut list = vec![self.operand()?];
            while self.peek() == Some(&Token::Comma) {
                self.at += 1;
                list.push(self.operand()?);
            }
            self.expect(Token::Close)?;
            return Ok(Expr::In(left, list));
        }
        match self.next() {
            Some(Token::Cmp(cmp)) => Ok(Expr::Compare(left, cmp, self.operand()?)),
            other => Err(ParseError(format!(
                "expected a comparator, BETWEEN or IN, found {other:?}"
            ))),
        }
    }

    /// A condition function's name followed by `(`; taken if so.
    fn function(&mut self) -> Option<Function> {
        let Some(Token::Word(w)) = self.peek() else {
            return None;
        };
        let function = match w.as_str() {
            "attribute_exists" => Function::Exists,
            "attribute_not_exists" => Function::NotExists,
            "attribute_type" => Function::Type,
            "begins_with" => Function::BeginsWith,
            "contains" => Function::Contains,
            _ => return None,
        };
        (self.tokens.get(self.at + 1) == Some(&Token::Open)).then(|| {
            self.at += 1;
            function
        })
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        match self.peek() {
            Some(Token::Word(w)) if w.starts_with(':') => {
                let w = w.clone();
                self.at += 1;
                Ok(Operand::Value(w))
            }
            Some(Token::Word(w))
                if w == "size" && self.tokens.get(self.at + 1) == Some(&Token::Open) =>
            {
                self.at += 2;
                let path = self.path()?;
                self.expect(Token::Close)?;
                Ok(Operand::Size(path))
            }
            _ => Ok(Operand::Path(self.path()?)),
        }
    }

    fn path(&mut self) -> Result<Vec<Step>, ParseError> {
        let mut steps = vec![self.name()?];
        loop {
            match self.peek() {
                Some(Token::Dot) => {
                    self.at += 1;
                    steps.push(self.name()?);
                }
                Some(Token::OpenBracket) => {
                    self.at += 1;
                    match self.next() {
                        Some(Token::Number(n)) => steps.push(Step::Index(n)),
                        other => {
                            return Err(ParseError(format!("expected an index, found {other:?}")));
                        }
                    }
                    self.expect(Token::CloseBracket)?;
                }
                _ => return Ok(steps),
            }
        }
    }

    fn name(&mut self) -> Result<Step, ParseError> {
        match self.next() {
            Some(Token::Word(w)) if !w.starts_with(':') => Ok(Step::Name(w)),
            other => Err(ParseError(format!(
                "expected an attribute, found {other:?}"
            ))),
        }
    }
}

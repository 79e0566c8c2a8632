//! A strict parser of the RFC 9651 subset floodgate writes: a List of Items
//! whose bare items are Strings or Integers, with parameters. Independent of
//! `sfv` (which writes the fields), so a serializer bug cannot hide behind the
//! same bug in its own parser.
#![allow(dead_code)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bare {
    Int(i64),
    Str(String),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub bare: Bare,
    pub params: Vec<(String, Bare)>,
}

impl Item {
    /// The String the item names (the policy name).
    pub fn name(&self) -> &str {
        match &self.bare {
            Bare::Str(s) => s,
            other => panic!("item is not a String: {other:?}"),
        }
    }

    /// An Integer parameter; panics if absent or of another type.
    pub fn int(&self, key: &str) -> i64 {
        match self.params.iter().find(|(k, _)| k == key) {
            Some((_, Bare::Int(v))) => *v,
            other => panic!("parameter {key} is not an Integer: {other:?}"),
        }
    }

    pub fn keys(&self) -> Vec<&str> {
        self.params.iter().map(|(k, _)| k.as_str()).collect()
    }
}

struct Input<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }
    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.pos += usize::from(c.is_some());
        c
    }
    fn skip_sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }
    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }
}

/// RFC 9651 §4.2 with §4.2.1 (lists); inner lists, decimals, tokens,
/// byte sequences, dates and display strings are rejected.
pub fn parse_list(field: &str) -> Result<Vec<Item>, String> {
    let mut input = Input {
        bytes: field.as_bytes(),
        pos: 0,
    };
    input.skip_sp();
    let mut items = Vec::new();
    while input.peek().is_some() {
        items.push(parse_item(&mut input)?);
        input.skip_ows();
        match input.next() {
            None => return Ok(items),
            Some(b',') => {}
            Some(c) => return Err(format!("expected ',' got {:?}", c as char)),
        }
        input.skip_ows();
        if input.peek().is_none() {
            return Err("trailing comma".into());
        }
    }
    Ok(items)
}

fn parse_item(input: &mut Input<'_>) -> Result<Item, String> {
    let bare = parse_bare(input)?;
    let mut params: Vec<(String, Bare)> = Vec::new();
    while input.peek() == Some(b';') {
        input.pos += 1;
        input.skip_sp();
        let key = parse_key(input)?;
        let value = if input.peek() == Some(b'=') {
            input.pos += 1;
            parse_bare(input)?
        } else {
            Bare::Bool(true)
        };
        // §4.2.3.2: a repeated key overwrites the earlier value.
        params.retain(|(k, _)| *k != key);
        params.push((key, value));
    }
    Ok(Item { bare, params })
}

fn parse_bare(input: &mut Input<'_>) -> Result<Bare, String> {
    match input.peek() {
        Some(b'"') => parse_string(input).map(Bare::Str),
        Some(b'-' | b'0'..=b'9') => parse_integer(input).map(Bare::Int),
        other => Err(format!("unsupported bare item at {}: {other:?}", input.pos)),
    }
}

fn parse_string(input: &mut Input<'_>) -> Result<String, String> {
    input.next(); // the opening quote
    let mut out = String::new();
    loop {
        match input.next() {
            None => return Err("unterminated string".into()),
            Some(b'"') => return Ok(out),
            Some(b'\\') => match input.next() {
                Some(c @ (b'"' | b'\\')) => out.push(c as char),
                other => return Err(format!("bad escape {other:?}")),
            },
            Some(c @ 0x20..=0x7e) => out.push(c as char),
            Some(c) => return Err(format!("invalid string byte {c:#x}")),
        }
    }
}

fn parse_integer(input: &mut Input<'_>) -> Result<i64, String> {
    let negative = input.peek() == Some(b'-');
    if negative {
        input.pos += 1;
    }
    let start = input.pos;
    while matches!(input.peek(), Some(b'0'..=b'9')) {
        input.pos += 1;
    }
    let digits = &input.bytes[start..input.pos];
    if digits.is_empty() || digits.len() > 15 {
        return Err(format!("integer with {} digits", digits.len()));
    }
    if input.peek() == Some(b'.') {
        return Err("decimal where an integer was expected".into());
    }
    let v: i64 = std::str::from_utf8(digits)
        .map_err(|e| e.to_string())?
        .parse()
        .map_err(|e: std::num::ParseIntError| e.to_string())?;
    Ok(if negative { -v } else { v })
}

fn parse_key(input: &mut Input<'_>) -> Result<String, String> {
    let mut key = String::new();
    match input.peek() {
        Some(c @ (b'a'..=b'z' | b'*')) => key.push(c as char),
        other => return Err(format!("bad key start {other:?}")),
    }
    input.pos += 1;
    while let Some(c @ (b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*')) = input.peek() {
        key.push(c as char);
        input.pos += 1;
    }
    Ok(key)
}

//! Derives for octopipe's stage properties, re-exported by `octopipe_core::stage`.
//!
//! `#[derive(Properties)]` on a struct with named fields makes, from the one declaration:
//! - the `PropSpec` table (`Properties::PROPS`): each field a property named after it in
//!   kebab-case, its type from the Rust type (through `PropValue`), its doc from the field's doc
//!   comment, its default text from `#[prop(default = ...)]`;
//! - `Properties::from_props`: each value parsed from the description, or the declared default;
//! - `Default`: every field at its declared default (a required one at its type's default).
//!
//! Field attributes, `#[prop(...)]`:
//! - `required`: must be given (`stage 'detect' needs model=...`); shown as `-`.
//! - `default = LIT`: the default as `inspect` shows it, and (unless `value` is given) the value
//!   taken when the property is left out, parsed as a written value would be. On an `Option`
//!   field `"auto"` or `"-"` means `None`, and a choice then also takes the word `auto`.
//! - `default = CONST`: a constant (an integer, a whole `f64`, a `Duration` in seconds, a list
//!   of bytes) whose value is written at compile time as the literal would be
//!   (`octopipe_core::stage::Shown`), then taken as a literal default is.
//! - `value = EXPR`: the value taken when left out, where the text is not one (`labels`:
//!   `class0,...` shown, an empty list taken).
//! - `range = A..=B`, `A..`, `..=B`: the bounds of a number (or the largest of a list of
//!   integers, or the longest side of a `WxH`); `positive`: above 0 (a positive number, an
//!   integer from 1, three positive numbers). An integer wider than 16 bits (or a list of them)
//!   must have an upper bound, so that no value sizes an allocation or a thread count past what
//!   a station can take (`octopipe_core::stage::limits`); `unbounded` says that the property
//!   sizes nothing (a seed, a count of frames to play).
//! - `name = "..."`: the property's name, where kebab-case of the field's is not it.
//! - `ty = EXPR`: the `PropType` itself, overriding the one of the Rust type.
//! - `spec = CONST`: the property is a `PropSpec` constant shared by stages (its name, type,
//!   default and doc; the default parsed as a written value would be).
//! - `flatten`: the field is a struct with `#[derive(Properties)]` whose properties are this
//!   one's too, at this place in the table (a block shared by several stages).
//!
//! Struct attribute `#[props(renamed(from = "old", to = "new"))]`: `old=` is refused with a
//! message naming `new` (a property renamed because its name now means something else).
//!
//! `#[derive(PropChoice)]` on an enum of unit variants: the words (kebab-case of the variants,
//! or `#[choice(name = "...")]`), `PropValue` (a choice of those words), `as_str` and `FromStr`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    parse_macro_input, Data, DeriveInput, Expr, ExprLit, ExprRange, Fields, GenericArgument, Lit,
    LitStr, PathArguments, RangeLimits, Type,
};

/// The `Properties` derive: the table, parsing and defaults of a stage's properties.
#[proc_macro_derive(Properties, attributes(prop, props))]
pub fn derive_properties(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    properties(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The `PropChoice` derive: an enum property's words.
#[proc_macro_derive(PropChoice, attributes(choice))]
pub fn derive_prop_choice(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    choice(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// What `#[prop(...)]` says of one field.
#[derive(Default)]
struct FieldAttrs {
    required: bool,
    flatten: bool,
    positive: bool,
    unbounded: bool,
    default: Option<(DefaultAttr, Span)>,
    value: Option<Expr>,
    range: Option<ExprRange>,
    name: Option<String>,
    ty: Option<Expr>,
    spec: Option<Expr>,
}

/// A `#[prop(default = ...)]`: a literal's text, or a constant whose value is written as one.
enum DefaultAttr {
    Text(String),
    Const(syn::Path),
}

fn field_attrs(attrs: &[syn::Attribute]) -> syn::Result<FieldAttrs> {
    let mut out = FieldAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("prop")) {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            match key.as_str() {
                "required" => out.required = true,
                "flatten" => out.flatten = true,
                "positive" => out.positive = true,
                "unbounded" => out.unbounded = true,
                "default" => {
                    let value = meta.value()?;
                    if !value.peek(syn::Lit) {
                        // A constant: its value written as a literal would be.
                        let path: syn::Path = value.parse()?;
                        out.default = Some((DefaultAttr::Const(path.clone()), path.span()));
                        return Ok(());
                    }
                    let lit: Lit = value.parse()?;
                    let text = match &lit {
                        Lit::Str(s) => s.value(),
                        // The digits as written, without a type suffix (`2u32`: `2`).
                        Lit::Int(i) => i.base10_digits().to_string(),
                        Lit::Float(f) => f.base10_digits().to_string(),
                        Lit::Bool(b) => b.value.to_string(),
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "a default is a string, number or bool",
                            ))
                        }
                    };
                    out.default = Some((DefaultAttr::Text(text), lit.span()));
                }
                "value" => out.value = Some(meta.value()?.parse()?),
                "range" => out.range = Some(meta.value()?.parse()?),
                "name" => out.name = Some(meta.value()?.parse::<LitStr>()?.value()),
                "ty" => out.ty = Some(meta.value()?.parse()?),
                "spec" => out.spec = Some(meta.value()?.parse()?),
                _ => return Err(meta.error(
                    "expected required, default, value, range, positive, unbounded, name, ty, spec or flatten",
                )),
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// `(from, to)` of each `#[props(renamed(from = "..", to = ".."))]`.
fn renamed(attrs: &[syn::Attribute]) -> syn::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("props")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("renamed") {
                return Err(meta.error("expected renamed(from = \"..\", to = \"..\")"));
            }
            let (mut from, mut to) = (None, None);
            meta.parse_nested_meta(|m| {
                let v = m.value()?.parse::<LitStr>()?.value();
                if m.path.is_ident("from") {
                    from = Some(v);
                } else if m.path.is_ident("to") {
                    to = Some(v);
                } else {
                    return Err(m.error("expected from or to"));
                }
                Ok(())
            })?;
            match (from, to) {
                (Some(f), Some(t)) => out.push((f, t)),
                _ => return Err(meta.error("renamed needs from = \"..\" and to = \"..\"")),
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// The doc comment's lines, trimmed and joined by spaces.
fn doc(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
            {
                let line = s.value();
                let line = line.trim();
                if !line.is_empty() {
                    lines.push(line.to_string());
                }
            }
        }
    }
    lines.join(" ")
}

/// `T` of `Option<T>`.
fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

/// Whether `ty` is an integer wider than 16 bits, or a `Vec` of them: a property of it needs an
/// upper bound.
fn is_wide_int(ty: &Type) -> bool {
    let Type::Path(p) = ty else { return false };
    let Some(last) = p.path.segments.last() else {
        return false;
    };
    if last.ident == "Vec" {
        if let PathArguments::AngleBracketed(args) = &last.arguments {
            if let Some(GenericArgument::Type(t)) = args.args.first() {
                return is_wide_int(t);
            }
        }
        return false;
    }
    ["u32", "u64", "u128", "usize", "i32", "i64", "i128", "isize"]
        .iter()
        .any(|n| last.ident == n)
}

/// `Some((A as i64, A as f64))` for a range bound, `None` where it is open.
fn bound(e: Option<&Expr>) -> Tokens {
    match e {
        Some(e) => quote!(::core::option::Option::Some(((#e) as i64, (#e) as f64))),
        None => quote!(::core::option::Option::None),
    }
}

fn kebab_field(ident: &syn::Ident) -> String {
    ident.to_string().trim_start_matches("r#").replace('_', "-")
}

fn properties(input: &DeriveInput) -> syn::Result<Tokens> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "Properties: a generic struct is not supported",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            input.span(),
            "Properties: only a struct with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new(
            input.span(),
            "Properties: only a struct with named fields",
        ));
    };
    let core = quote!(::octopipe_core::stage);
    let mut pieces = Vec::new();
    let mut parse = Vec::new();
    let mut defaults = Vec::new();
    for field in &fields.named {
        let ident = field.ident.as_ref().expect("named field");
        let ty = &field.ty;
        let a = field_attrs(&field.attrs)?;
        if a.flatten {
            pieces.push(quote_spanned!(ty.span()=> <#ty as #core::Properties>::PROPS));
            parse.push(quote!(#ident: <#ty as #core::Properties>::from_props(p)?));
            defaults.push(quote!(#ident: ::core::default::Default::default()));
            continue;
        }
        if let Some(spec) = &a.spec {
            // A `PropSpec` constant several stages share: its name, type, default and doc.
            if a.required || a.default.is_some() || a.value.is_some() || option_inner(ty).is_some()
            {
                return Err(syn::Error::new(
                    ident.span(),
                    "Properties: a spec = CONST field is not an Option and takes its default from the constant",
                ));
            }
            let (name, text) = (quote!((#spec).name), quote!((#spec).default));
            let default_value = quote!(#core::prop_default::<#ty>(#name, #text));
            pieces.push(quote!(&[#spec]));
            parse.push(quote!(#ident: match p.given(#name) {
                ::core::option::Option::Some(v) => p.parse::<#ty>(#name, v)?,
                ::core::option::Option::None => #default_value,
            }));
            defaults.push(quote!(#ident: #default_value));
            continue;
        }
        let prop = a.name.clone().unwrap_or_else(|| kebab_field(ident));
        let doc = doc(&field.attrs);
        if doc.is_empty() {
            return Err(syn::Error::new(
                ident.span(),
                "Properties: a property needs a doc comment (inspect shows it)",
            ));
        }
        let inner = option_inner(ty);
        let value_ty = inner.unwrap_or(ty);
        // The default's text: a literal's (`auto` and `-` mean what they say), or the
        // constant's value written out at compile time.
        let (text, default_text) = match (&a.default, a.required) {
            (Some((_, span)), true) => {
                return Err(syn::Error::new(*span, "a required property has no default"))
            }
            (Some((DefaultAttr::Text(t), _)), false) => (t.clone(), quote!(#t)),
            (Some((DefaultAttr::Const(c), _)), false) => (
                String::new(),
                quote!({
                    const SHOWN: #core::ShownText = #core::Shown(#c).text();
                    #core::ShownText::as_str(&SHOWN)
                }),
            ),
            (None, _) => ("-".to_string(), quote!("-")),
        };
        if !a.required && a.default.is_none() && inner.is_none() && a.value.is_none() {
            return Err(syn::Error::new(
                ident.span(),
                "Properties: give this property a default (or mark it required, or make it an Option)",
            ));
        }
        let bounded = a.range.as_ref().is_some_and(|r| r.end.is_some());
        if a.ty.is_none() && is_wide_int(value_ty) && !bounded && !a.unbounded {
            return Err(syn::Error::new(
                ident.span(),
                "Properties: an integer property needs an upper bound (range = ..=N; \
                 octopipe_core::stage::limits has the shared ones), or `unbounded` where it sizes \
                 nothing",
            ));
        }
        // `auto` (or `-`) on an Option: left out or written as `auto`, the value is `None`.
        let auto = inner.is_some() && text == "auto";
        let prop_type = match &a.ty {
            Some(t) => quote!(#t),
            None => {
                let base = if auto {
                    quote_spanned!(value_ty.span()=> <#value_ty as #core::PropValue>::AUTO_TYPE)
                } else {
                    quote_spanned!(value_ty.span()=> <#value_ty as #core::PropValue>::TYPE)
                };
                let ranged = match &a.range {
                    Some(r) => {
                        if matches!(r.limits, RangeLimits::HalfOpen(_)) && r.end.is_some() {
                            return Err(syn::Error::new(
                                r.span(),
                                "a property's range includes its end: write A..=B",
                            ));
                        }
                        let (lo, hi) = (bound(r.start.as_deref()), bound(r.end.as_deref()));
                        quote!(#base.with_range(#lo, #hi))
                    }
                    None => base,
                };
                if a.positive {
                    quote!(#ranged.positive())
                } else {
                    ranged
                }
            }
        };
        pieces.push(quote!(&[#core::PropSpec::new(#prop, #prop_type, #default_text, #doc)]));

        let default_value = if let Some(v) = &a.value {
            quote!(#v)
        } else if a.required {
            quote!(::core::default::Default::default())
        } else if inner.is_some() {
            if text == "-" || text == "auto" {
                quote!(::core::option::Option::None)
            } else {
                quote!(::core::option::Option::Some(#core::prop_default::<#value_ty>(#prop, #default_text)))
            }
        } else {
            quote!(#core::prop_default::<#ty>(#prop, #default_text))
        };
        let given = if a.required {
            quote!({
                let v = p.required(#prop)?;
                p.parse::<#ty>(#prop, v)?
            })
        } else if inner.is_some() {
            let auto_none = if auto {
                quote!(::core::option::Option::Some("auto") => ::core::option::Option::None,)
            } else {
                quote!()
            };
            quote!(match p.given(#prop) {
                #auto_none
                ::core::option::Option::Some(v) => ::core::option::Option::Some(p.parse::<#value_ty>(#prop, v)?),
                ::core::option::Option::None => #default_value,
            })
        } else {
            quote!(match p.given(#prop) {
                ::core::option::Option::Some(v) => p.parse::<#ty>(#prop, v)?,
                ::core::option::Option::None => #default_value,
            })
        };
        parse.push(quote!(#ident: #given));
        defaults.push(quote!(#ident: #default_value));
    }
    for (from, to) in renamed(&input.attrs)? {
        let doc = format!("renamed: {to}");
        pieces.push(
            quote!(&[#core::PropSpec::new(#from, #core::PropType::Renamed { to: #to }, "-", #doc)]),
        );
    }
    Ok(quote! {
        impl #core::Properties for #name {
            const PROPS: &'static [#core::PropSpec] = {
                const PIECES: &[&[#core::PropSpec]] = &[#(#pieces),*];
                const N: usize = #core::props_len(PIECES);
                const TABLE: [#core::PropSpec; N] = #core::props_concat(PIECES);
                &TABLE
            };

            fn from_props(p: &#core::Props<'_>) -> ::core::result::Result<Self, ::octopipe_core::description::DescribeError> {
                ::core::result::Result::Ok(#name { #(#parse),* })
            }
        }

        impl ::core::default::Default for #name {
            fn default() -> Self {
                #name { #(#defaults),* }
            }
        }
    })
}

/// `CenterNet` -> `center-net`.
fn kebab_variant(ident: &syn::Ident) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in ident.to_string().chars() {
        if c.is_uppercase() {
            if prev_lower {
                out.push('-');
            }
            out.extend(c.to_lowercase());
            prev_lower = false;
        } else {
            out.push(c);
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

fn choice(input: &DeriveInput) -> syn::Result<Tokens> {
    let name = &input.ident;
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new(
            input.span(),
            "PropChoice: only an enum of unit variants",
        ));
    };
    let core = quote!(::octopipe_core::stage);
    let mut words = Vec::new();
    let mut variants = Vec::new();
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(syn::Error::new(v.span(), "PropChoice: only unit variants"));
        }
        let mut word = kebab_variant(&v.ident);
        for attr in v.attrs.iter().filter(|a| a.path().is_ident("choice")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    word = meta.value()?.parse::<LitStr>()?.value();
                    Ok(())
                } else {
                    Err(meta.error("expected name = \"...\""))
                }
            })?;
        }
        if words.contains(&word) {
            return Err(syn::Error::new(
                v.span(),
                format!("PropChoice: '{word}' twice"),
            ));
        }
        words.push(word);
        variants.push(&v.ident);
    }
    let mut auto_words = words.clone();
    if !words.iter().any(|w| w == "auto") {
        auto_words.insert(0, "auto".to_string());
    }
    Ok(quote! {
        impl #core::PropChoice for #name {
            const WORDS: &'static [&'static str] = &[#(#words),*];

            fn as_str(&self) -> &'static str {
                match self {
                    #(#name::#variants => #words),*
                }
            }
        }

        impl #core::PropValue for #name {
            const TYPE: #core::PropType = #core::PropType::Choice(&[#(#words),*]);
            const AUTO_TYPE: #core::PropType = #core::PropType::Choice(&[#(#auto_words),*]);

            fn parse_prop(s: &str) -> ::core::option::Option<Self> {
                match s {
                    #(#words => ::core::option::Option::Some(#name::#variants),)*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl ::core::str::FromStr for #name {
            type Err = #core::ChoiceError;

            fn from_str(s: &str) -> ::core::result::Result<Self, Self::Err> {
                <Self as #core::PropValue>::parse_prop(s).ok_or_else(|| #core::ChoiceError {
                    found: s.to_string(),
                    words: <Self as #core::PropChoice>::WORDS,
                })
            }
        }
    })
}

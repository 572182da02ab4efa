//! `#[derive(Properties)]` and `#[derive(PropChoice)]` on a struct with every supported type: the
//! table, the defaults, parsing and the messages of bad values.

use std::path::PathBuf;

use super::props::StageDecl;
use super::role::Role;
use crate::description::{DescribeError, Description, Prop, Span, StageDesc};
use crate::stage::{Item, PropChoice, PropType, PropValue, Properties, Props};

/// A choice.
#[derive(Debug, Clone, Copy, PartialEq, PropChoice)]
enum Mode {
    /// The first.
    Fast,
    /// Named apart.
    #[choice(name = "slow-ish")]
    Slow,
    /// Kebab-case of the variant.
    CenterNet,
}

/// A block flattened into [`All`].
#[derive(Debug, Clone, PartialEq, Properties)]
struct Inner {
    /// shared count
    #[prop(default = 2, range = 1..=9)]
    shared: u32,
}

/// Every supported type.
#[derive(Debug, Clone, PartialEq, Properties)]
#[props(renamed(from = "old", to = "shared"))]
struct All {
    /// a path,
    /// on two lines
    #[prop(required)]
    path: PathBuf,
    /// an int
    #[prop(default = 5, range = 0..=10)]
    count: usize,
    /// a float
    #[prop(default = 0.5, range = 0.0..=1.0)]
    ratio: f64,
    /// a positive float
    #[prop(default = "auto", value = 0.25, positive)]
    scale: f32,
    /// a bool
    #[prop(default = true)]
    on: bool,
    /// a text
    #[prop(default = "hi")]
    text: String,
    /// a size
    #[prop(default = "4x3")]
    size: (u32, u32),
    /// three numbers
    #[prop(default = "1,2,3", positive)]
    mean: [f32; 3],
    /// a list
    #[prop(default = "all", value = Vec::new())]
    list: Vec<String>,
    /// integers
    #[prop(default = "auto", range = ..=64)]
    sizes: Option<Vec<usize>>,
    /// a choice
    #[prop(default = "fast")]
    mode: Mode,
    /// a choice or auto
    #[prop(default = "auto")]
    pick: Option<Mode>,
    /// nothing by default
    tiles: Option<(u32, u32)>,
    /// The flattened block.
    #[prop(flatten)]
    inner: Inner,
}

const ALL: StageDecl = StageDecl {
    name: "all",
    role: Role::Filter(Item::FRAMES),
    doc: "every property type",
    props: All::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Err(p.error("path", "not made here")),
};

/// `all k=v k=v ...` as the parser would give it (no quotes).
fn description(props: &str) -> Description {
    let text = format!("all {props}");
    let mut stage = StageDesc {
        kind: "all".into(),
        span: Span { start: 0, len: 3 },
        props: Vec::new(),
        chain: 0,
        reference: false,
        end: text.len(),
    };
    let mut at = 4;
    for kv in props.split(' ').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap();
        stage.props.push(Prop {
            key: k.into(),
            value: v.into(),
            key_span: Span {
                start: at,
                len: k.len(),
            },
            value_span: Span {
                start: at + k.len() + 1,
                len: v.len().max(1),
            },
        });
        at += kv.len() + 1;
    }
    Description {
        origin: "test".into(),
        text,
        stages: vec![stage],
    }
}

/// Check, then parse, as the builder does.
fn parse(props: &str) -> Result<All, DescribeError> {
    let desc = description(props);
    let p = Props::new(&desc, &desc.stages[0], &ALL);
    p.check()?;
    All::from_props(&p)
}

fn message(props: &str) -> String {
    parse(props).unwrap_err().message
}

#[test]
fn the_table_has_each_field_with_its_type_default_and_doc() {
    let row = |name: &str| *All::PROPS.iter().find(|p| p.name == name).unwrap();
    let names: Vec<_> = All::PROPS.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "path", "count", "ratio", "scale", "on", "text", "size", "mean", "list", "sizes",
            "mode", "pick", "tiles", "shared", "old"
        ]
    );
    let types: Vec<_> = All::PROPS.iter().map(|p| p.ty.name()).collect();
    assert_eq!(
        types,
        [
            "path",
            "int",
            "float",
            "float",
            "bool",
            "string",
            "WxH",
            "3 floats",
            "list",
            "list of int",
            "fast|slow-ish|center-net",
            "auto|fast|slow-ish|center-net",
            "WxH",
            "int",
            "renamed"
        ]
    );
    let defaults: Vec<_> = All::PROPS.iter().map(|p| p.default).collect();
    assert_eq!(
        defaults,
        [
            "-", "5", "0.5", "auto", "true", "hi", "4x3", "1,2,3", "all", "auto", "fast", "auto",
            "-", "2", "-"
        ]
    );
    assert_eq!(row("path").doc, "a path, on two lines");
    assert_eq!(row("count").ty, PropType::Int { min: 0, max: 10 });
    assert_eq!(row("shared").ty, PropType::Int { min: 1, max: 9 });
    assert_eq!(row("scale").ty, PropType::POSITIVE_FLOAT);
    assert_eq!(row("mean").ty, PropType::Floats3 { positive: true });
    assert_eq!(row("sizes").ty, PropType::Ints { max: 64 });
    assert_eq!(row("old").ty, PropType::Renamed { to: "shared" });
    assert_eq!(<u8 as PropValue>::TYPE, PropType::Int { min: 0, max: 255 });
    assert_eq!(<usize as PropValue>::TYPE, PropType::COUNT);
}

#[test]
fn left_out_each_takes_its_default() {
    let expected = All {
        path: PathBuf::new(),
        count: 5,
        ratio: 0.5,
        scale: 0.25,
        on: true,
        text: "hi".into(),
        size: (4, 3),
        mean: [1.0, 2.0, 3.0],
        list: Vec::new(),
        sizes: None,
        mode: Mode::Fast,
        pick: None,
        tiles: None,
        inner: Inner { shared: 2 },
    };
    assert_eq!(All::default(), expected);
    let parsed = parse("path=m.onnx").unwrap();
    assert_eq!(
        parsed,
        All {
            path: "m.onnx".into(),
            ..expected
        }
    );
}

#[test]
fn given_each_is_parsed() {
    let all = parse(
        "path=p count=10 ratio=1 scale=2.5 on=no text=x size=7x8 mean=1,1,0.5 list=a,b \
         sizes=1,8,64 mode=slow-ish pick=center-net tiles=2x2 shared=9",
    )
    .unwrap();
    assert_eq!(
        all,
        All {
            path: "p".into(),
            count: 10,
            ratio: 1.0,
            scale: 2.5,
            on: false,
            text: "x".into(),
            size: (7, 8),
            mean: [1.0, 1.0, 0.5],
            list: vec!["a".into(), "b".into()],
            sizes: Some(vec![1, 8, 64]),
            mode: Mode::Slow,
            pick: Some(Mode::CenterNet),
            tiles: Some((2, 2)),
            inner: Inner { shared: 9 },
        }
    );
    assert_eq!(parse("path=p pick=auto").unwrap().pick, None);
}

#[test]
fn bad_values_are_refused_naming_the_stage_the_property_and_what_it_must_be() {
    assert_eq!(message("count=1"), "stage 'all' needs path=...");
    assert_eq!(
        message("path=p count=11"),
        "all: count must be an integer from 0 to 10, found '11'"
    );
    assert_eq!(
        message("path=p scale=0"),
        "all: scale must be a positive number, found '0'"
    );
    assert_eq!(
        message("path=p mode=slow"),
        "all: mode must be one of fast, slow-ish, center-net, found 'slow'"
    );
    assert_eq!(
        message("path=p mode=auto"),
        "all: mode must be one of fast, slow-ish, center-net, found 'auto'"
    );
    assert_eq!(
        message("path=p sizes=1,65"),
        "all: sizes must be a comma-separated list of integers 0..64, found '1,65'"
    );
    assert_eq!(
        message("path=p shared=0"),
        "all: shared must be an integer from 1 to 9, found '0'"
    );
    assert_eq!(
        message("path=p cont=1"),
        "stage 'all' has no property 'cont' (did you mean 'count'?)"
    );
    assert_eq!(
        message("path=p old=3"),
        "all: old is now called shared (shared count): write shared=3"
    );
    // A renamed property is no suggestion.
    assert!(!message("path=p ol=3").contains("'old'"));
}

#[test]
fn a_choice_reads_and_writes_its_words() {
    assert_eq!(Mode::WORDS, ["fast", "slow-ish", "center-net"]);
    assert_eq!("slow-ish".parse::<Mode>(), Ok(Mode::Slow));
    assert_eq!(Mode::CenterNet.as_str(), "center-net");
    assert_eq!(
        "slow".parse::<Mode>().unwrap_err().to_string(),
        "'slow' is not one of fast, slow-ish, center-net"
    );
}

#[test]
fn every_pixel_format_word_is_its_format() {
    let PropType::Choice(words) = <crate::frame::PixelFormat as PropValue>::TYPE else {
        panic!("a choice");
    };
    for word in words {
        let f = crate::frame::PixelFormat::parse_prop(word).unwrap();
        let name = f.to_string().to_lowercase();
        assert_eq!(name.trim_end_matches("_le"), *word);
    }
}

#[test]
fn sizes_and_integers_carry_their_bounds_and_show_them() {
    use crate::stage::limits::MAX_SIDE;
    assert_eq!(
        <(u32, u32) as PropValue>::TYPE,
        PropType::Size { max: MAX_SIDE }
    );
    assert!(!<(u32, u32) as PropValue>::TYPE.accepts("100000x100000"));
    let small = <(u32, u32) as PropValue>::TYPE.with_range(None, Some((64, 64.0)));
    assert_eq!(small, PropType::Size { max: 64 });
    assert!(small.accepts("64x64") && !small.accepts("65x1") && !small.accepts("0x1"));
    assert_eq!(small.range().as_deref(), Some("1..=64"));
    assert_eq!(
        small.expected(),
        "WIDTHxHEIGHT with both from 1 to 64, e.g. 64x64"
    );
    let threads = PropType::Int { min: 0, max: 256 };
    assert_eq!(threads.range().as_deref(), Some("0..=256"));
    assert!(!threads.accepts("5000") && !threads.accepts("-1") && threads.accepts("256"));
    assert_eq!(threads.expected(), "an integer from 0 to 256");
    // A type without an upper bound shows none.
    assert_eq!(PropType::COUNT.range(), None);
    assert_eq!(PropType::POSITIVE_FLOAT.range(), None);
}

const LOOPS: u32 = 3;
const RATE: f64 = 30.0;
const WAIT: std::time::Duration = std::time::Duration::from_millis(1500);
const SKIP: &[u8] = &[11, 4];

/// Defaults given as constants.
#[derive(Debug, Clone, PartialEq, Properties)]
struct FromConsts {
    /// an int from a u32 constant
    #[prop(default = LOOPS, range = 1..=9)]
    loops: u64,
    /// a float from a whole f64 constant
    #[prop(default = RATE, positive)]
    rate: f64,
    /// seconds from a Duration constant
    #[prop(default = self::WAIT, positive)]
    wait: f64,
    /// integers from a constant list
    #[prop(default = SKIP, range = ..=11)]
    skip: Vec<i64>,
    /// an Option from a constant
    #[prop(default = LOOPS, range = 1..=9)]
    maybe: Option<u32>,
}

#[test]
fn a_constant_default_is_shown_as_its_literal_and_taken_as_one() {
    let defaults: Vec<_> = FromConsts::PROPS.iter().map(|p| p.default).collect();
    assert_eq!(defaults, ["3", "30", "1.5", "11,4", "3"]);
    let expected = FromConsts {
        loops: 3,
        rate: 30.0,
        wait: 1.5,
        skip: vec![11, 4],
        maybe: Some(3),
    };
    assert_eq!(FromConsts::default(), expected);
}

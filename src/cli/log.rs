//! Logging: the tracing subscriber, and the plain `octopipe: warning: ...` lines it writes.

/// Set up the tracing subscriber: `RUST_LOG`'s filter if set, else warnings, errors and the
/// control plane's audit lines (who added or removed which stream: target `octopipe::audit`)
/// (with `verbose`, every note) as plain lines on stderr.
pub(crate) fn init(verbose: bool) {
    if std::env::var_os("RUST_LOG").is_some() {
        // tracing's own format: each event one line all the same (no colours, whose escapes
        // would be escaped too).
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_ansi(false)
            .with_writer(|| OneLine)
            .init();
    } else {
        // Warnings (a live source gone quiet, a reconnect) are for the user: one plain line each.
        let filter = match verbose {
            true => "info",
            false => "warn,octopipe::audit=info",
        };
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .event_format(PlainLines)
            .with_writer(std::io::stderr)
            .init();
    }
}

/// stderr, where each event (written whole, as one line) has its control characters escaped
/// but its last newline: a value a user gave (a location) cannot forge a line.
struct OneLine;

impl std::io::Write for OneLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (line, end) = match text.strip_suffix('\n') {
            Some(line) => (line, "\n"),
            None => (text.as_ref(), ""),
        };
        let line = octopipe::redact::controls(line);
        let mut err = std::io::stderr().lock();
        err.write_all(line.as_bytes())?;
        err.write_all(end.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Warnings and errors logged by the library, as `octopipe: warning: ...` lines.
struct PlainLines;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for PlainLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            _ => "note",
        };
        write!(writer, "octopipe: {level}: ")?;
        // Values a user gave (a location, a stream's name) may hold line breaks or terminal
        // escapes: each event is one line, its control characters escaped.
        let mut fields = String::new();
        let into = tracing_subscriber::fmt::format::Writer::new(&mut fields);
        ctx.field_format().format_fields(into, event)?;
        writeln!(writer, "{}", octopipe::redact::controls(&fields))
    }
}

//! Every span and event of the thread it is installed on, fields and all, as
//! text: what a test greps for secrets. Included by the tests that need it.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Every log line and span field, as text (`.0`).
#[derive(Clone, Default)]
pub struct Capture(pub Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut text = self.0.lock().unwrap();
        text.push_str(&format!("span {}", attrs.metadata().name()));
        attrs.record(&mut Fields(&mut text));
        text.push('\n');
    }
    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut text = self.0.lock().unwrap();
        text.push_str("record");
        values.record(&mut Fields(&mut text));
        text.push('\n');
    }
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut text = self.0.lock().unwrap();
        text.push_str(&format!("event {} {}", event.metadata().level(), event.metadata().target()));
        event.record(&mut Fields(&mut text));
        text.push('\n');
    }
}

//! `console.*` output, capped in total size; the cut is marked.

pub(crate) struct Logs {
    lines: Vec<String>,
    used: usize,
    limit: usize,
    truncated: bool,
}

impl Logs {
    pub fn new(limit: usize) -> Self {
        Self { lines: Vec::new(), used: 0, limit, truncated: false }
    }

    pub fn push(&mut self, level: &str, text: &str) {
        if self.truncated {
            return;
        }
        let line = if level == "log" { text.to_owned() } else { format!("[{level}] {text}") };
        if self.used + line.len() > self.limit {
            let room = self.limit.saturating_sub(self.used);
            let mut cut = room.min(line.len());
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            if cut > 0 {
                self.lines.push(line[..cut].to_owned());
            }
            self.lines.push(format!("[logs truncated: over the {}-byte limit]", self.limit));
            self.truncated = true;
            return;
        }
        self.used += line.len();
        self.lines.push(line);
    }

    pub fn take_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_are_capped_and_the_cut_is_marked() {
        let mut logs = Logs::new(16);
        logs.push("log", "12345");
        logs.push("warn", "x");
        logs.push("log", "überlong"); // 9 bytes of which 3 fit: "ü" is 2 bytes
        logs.push("log", "ignored");
        let lines = logs.take_lines();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(&lines[..3], ["12345", "[warn] x", "üb"]);
        assert!(lines[3].contains("logs truncated"));
    }
}

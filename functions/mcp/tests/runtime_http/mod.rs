//! The mock Lambda Runtime API's side of HTTP/1.1, shared by the telemetry
//! test and the bootstrap bench: just enough to read one request.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

/// Read one HTTP/1.1 request: (request line, body).
pub fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        if header.trim().is_empty() {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((line.trim().to_owned(), body))
}

//! MCP Apps passthrough (`io.modelcontextprotocol/ui`): the `ui://`
//! resources of the upstream MCP servers, found and read for the MCP host.
//!
//! URIs are passed on as the upstreams name them, so a tool's
//! `_meta.ui.resourceUri` (describe's `@ui` line, a search item's `ui`) is
//! the very URI a client reads. A URI is routed to the source that names it:
//! listed by its `resources/list`, or linked by one of its tools (servers may
//! leave UI-only resources out of their list). A URI two sources name is
//! served by neither and logged once: the gateway cannot tell whose view a
//! client means, and one server's view shown for another's tool would
//! mislead. Rewriting URIs per namespace was the alternative; it would break
//! every link a server's tools and views hold to their own URIs. Only
//! `ui://` URIs pass; any other is not found.
//!
//! Reads go through the source's own connection (its client and headers,
//! the outbound rules and timeout), a per-owner server's with the reader's
//! token in their session. What comes back is redacted like any result and
//! passed on whole, each content's `_meta.ui` included, up to
//! [`MAX_UI_RESOURCE_BYTES`].

use std::collections::{BTreeMap, HashSet};

use executor_core::Principal;
use executor_sandbox::{Tools, UiResource, UiResourceError, is_ui_uri};
use serde_json::Value;

use crate::catalog::availability::Retrying;
use crate::catalog::{Catalog, Connection, Source, Upstream};
use crate::mcp_client::McpClientError;
use crate::mcp_source::OwnerMcpError;
use crate::tool::ToolDef;

/// The largest `resources/read` answer passed on, as JSON: a UI is one HTML
/// document, and the answer must fit a Lambda response (6 MB) with room to spare.
pub(crate) const MAX_UI_RESOURCE_BYTES: usize = 2 << 20;

/// One MCP source's UI resources, as far as they are known.
struct SourceUi<'a> {
    namespace: &'a str,
    /// Its `ui://` entries of `resources/list`.
    listed: &'a [Value],
    /// Its tools' links: (tool path, the `ui://` URI of its view).
    links: Vec<(&'a str, &'a str)>,
}

/// Every URI named by exactly one source, with that source; and the URIs
/// more than one names, with the sources (served by none).
#[derive(Debug, Default, PartialEq)]
struct Routes {
    resources: Vec<UiResource>,
    ambiguous: BTreeMap<String, Vec<String>>,
}

impl Routes {
    fn find(&self, uri: &str) -> Result<&UiResource, UiResourceError> {
        if let Some(namespaces) = self.ambiguous.get(uri) {
            return Err(UiResourceError::Ambiguous { uri: uri.to_owned(), namespaces: namespaces.join(", ") });
        }
        self.resources.iter().find(|r| r.uri == uri).ok_or_else(|| UiResourceError::NotFound { uri: uri.to_owned() })
    }
}

/// The routing table of `sources`, in URI order; within a source its first
/// listing of a URI counts.
fn route(sources: &[SourceUi<'_>]) -> Routes {
    let mut by_uri: BTreeMap<&str, UiResource> = BTreeMap::new();
    let mut ambiguous: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for source in sources {
        let mut own: BTreeMap<&str, UiResource> = BTreeMap::new();
        let resource = |uri: &str, listed| UiResource {
            uri: uri.to_owned(),
            namespace: source.namespace.to_owned(),
            tools: Vec::new(),
            listed,
        };
        for entry in source.listed {
            let Some(uri) = entry["uri"].as_str().filter(|uri| is_ui_uri(uri)) else { continue };
            own.entry(uri).or_insert_with(|| resource(uri, Some(entry.clone())));
        }
        for (path, uri) in source.links.iter().filter(|(_, uri)| is_ui_uri(uri)) {
            own.entry(uri).or_insert_with(|| resource(uri, None)).tools.push((*path).to_owned());
        }
        for (uri, resource) in own {
            if let Some(namespaces) = ambiguous.get_mut(uri) {
                namespaces.push(resource.namespace);
            } else if let Some(first) = by_uri.remove(uri) {
                ambiguous.insert(uri.to_owned(), vec![first.namespace, resource.namespace]);
            } else {
                by_uri.insert(uri, resource);
            }
        }
    }
    Routes { resources: by_uri.into_values().collect(), ambiguous }
}

/// Why a read failed, before it is worded for the client.
enum ReadFailure {
    Client(McpClientError),
    Owner(OwnerMcpError),
}

impl Catalog {
    /// Every MCP source with a connection.
    fn mcp_sources(&self) -> impl Iterator<Item = (&Source, &Connection)> {
        self.sources.iter().filter_map(|source| {
            let connection = source.connection()?;
            matches!(connection.upstream, Upstream::Mcp(_) | Upstream::OwnerMcp(_)).then_some((source, connection))
        })
    }

    /// The tools of `source` known on this instance.
    fn tools_of<'a>(&'a self, source: &'a Source) -> Vec<&'a ToolDef> {
        if let Some(mcp) = self.owner_mcp(&source.namespace) {
            return mcp.tools().map(|listed| listed.tools.iter().collect()).unwrap_or_default();
        }
        if let Some(healed) = source.retrying().and_then(Retrying::healed) {
            return healed.tools.iter().collect();
        }
        self.tools.iter().filter(|tool| tool.namespace == source.namespace).collect()
    }

    fn source_ui<'a>(&'a self, source: &'a Source, listed: &'a [Value]) -> SourceUi<'a> {
        let links = self
            .tools_of(source)
            .into_iter()
            .filter_map(|tool| Some((tool.path.as_str(), tool.ui()?.resource_uri()?)))
            .collect();
        SourceUi { namespace: &source.namespace, listed, links }
    }

    /// [`route`], with each URI that more than one source names logged once.
    fn routes(&self, sources: &[SourceUi<'_>]) -> Routes {
        let routes = route(sources);
        let mut logged = self.ui_ambiguity_logged.lock().unwrap_or_else(|e| e.into_inner());
        for (uri, namespaces) in &routes.ambiguous {
            if logged.insert(uri.clone()) {
                tracing::warn!(
                    %uri,
                    namespaces = %namespaces.join(", "),
                    "a UI resource is named by more than one MCP source, so it is served by none; connect only one \
                     of them, or have the servers name their UI resources apart"
                );
            }
        }
        routes
    }

    /// The UI resources known without asking anyone: the tools' links, and
    /// the lists already read.
    pub(super) fn known_ui(&self) -> Vec<UiResource> {
        let sources: Vec<SourceUi<'_>> = self
            .mcp_sources()
            .map(|(source, connection)| {
                let listed = match &connection.upstream {
                    Upstream::Mcp(mcp) => mcp.ui_listed(),
                    Upstream::OwnerMcp(mcp) => mcp.ui_listed(),
                    _ => &[],
                };
                self.source_ui(source, listed)
            })
            .collect();
        self.routes(&sources).resources
    }

    /// The routing table as `owner` meets it: every MCP source's list read
    /// where it was not yet (concurrently), and the per-owner sources
    /// `owner` has not connected (in the table, so a URI is routed the same
    /// for everyone, but not theirs to read).
    async fn ui_for(&self, owner: &Principal) -> (Routes, HashSet<&str>) {
        // Sources due a retry get it first, as for a search.
        self.heal().await;
        // An OAuth-protected server's tools (and so their links) are listed with a connected owner's token.
        self.prepare_for(owner).await;
        let listings = self.mcp_sources().map(|(source, connection)| async move {
            let listed = match &connection.upstream {
                Upstream::Mcp(mcp) => mcp.list_ui().await.map_err(|e| e.to_string()),
                Upstream::OwnerMcp(mcp) => match mcp.list_ui(owner).await {
                    Ok(listed) => Ok(listed),
                    Err(OwnerMcpError::Token(_)) => return (source, mcp.ui_listed(), false),
                    Err(error) => Err(error.to_string()),
                },
                _ => Ok(&[][..]),
            };
            let listed = listed.unwrap_or_else(|error| {
                let error = connection.redactor().redact(&error);
                tracing::warn!(namespace = %source.namespace, %error, "UI resources could not be listed; tried again on the next request");
                &[]
            });
            (source, listed, true)
        });
        let listings = futures_util::future::join_all(listings).await;
        let not_connected = listings.iter().filter(|(_, _, ok)| !ok).map(|(s, _, _)| s.namespace.as_str()).collect();
        let sources: Vec<SourceUi<'_>> =
            listings.into_iter().map(|(source, listed, _)| self.source_ui(source, listed)).collect();
        (self.routes(&sources), not_connected)
    }

    /// `resources/list`: the UI resources `owner` may read.
    pub(super) async fn list_ui(&self, owner: &Principal) -> Vec<UiResource> {
        let (routes, not_connected) = self.ui_for(owner).await;
        routes.resources.into_iter().filter(|r| !not_connected.contains(r.namespace.as_str())).collect()
    }

    /// `resources/read` of `uri` from the source that names it, as `owner`.
    pub(super) async fn read_ui(&self, owner: &Principal, uri: &str) -> Result<Value, UiResourceError> {
        if !is_ui_uri(uri) {
            return Err(UiResourceError::NotFound { uri: uri.to_owned() });
        }
        let (routes, not_connected) = self.ui_for(owner).await;
        let namespace = routes.find(uri)?.namespace.clone();
        let needs_connection =
            || UiResourceError::NeedsConnection { uri: uri.to_owned(), namespace: namespace.clone() };
        if not_connected.contains(namespace.as_str()) {
            return Err(needs_connection());
        }
        let Some(connection) = self.source(&namespace).and_then(Source::connection) else {
            return Err(UiResourceError::NotFound { uri: uri.to_owned() });
        };
        let read = match &connection.upstream {
            Upstream::Mcp(mcp) => mcp.read(uri).await.map_err(ReadFailure::Client),
            Upstream::OwnerMcp(mcp) => mcp.read(owner, uri).await.map_err(ReadFailure::Owner),
            _ => unreachable!("only MCP sources serve UI resources"),
        };
        let redactor = connection.redactor();
        let upstream = |message: String| UiResourceError::Upstream {
            uri: uri.to_owned(),
            namespace: namespace.clone(),
            message: redactor.redact(&message),
        };
        let result = match read {
            Ok(result) => result,
            Err(
                ReadFailure::Client(McpClientError::Rpc { code: -32002 | -32602, .. })
                | ReadFailure::Owner(OwnerMcpError::Failed(McpClientError::Rpc { code: -32002 | -32602, .. })),
            ) => return Err(UiResourceError::NotFound { uri: uri.to_owned() }),
            Err(ReadFailure::Owner(OwnerMcpError::Token(_))) => return Err(needs_connection()),
            Err(ReadFailure::Client(error)) => return Err(upstream(format!("resources/read failed: {error}"))),
            Err(ReadFailure::Owner(error)) => return Err(upstream(error.to_string())),
        };
        if !result["contents"].is_array() {
            return Err(upstream("the server's answer has no `contents`".into()));
        }
        let bytes = result.to_string().len();
        if bytes > MAX_UI_RESOURCE_BYTES {
            return Err(UiResourceError::TooLarge { uri: uri.to_owned(), bytes, limit: MAX_UI_RESOURCE_BYTES });
        }
        Ok(redactor.redact_json(result))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(uri: &str) -> Value {
        json!({"uri": uri, "name": uri, "mimeType": "text/html;profile=mcp-app"})
    }

    /// (uri, namespace, tools, listed) of each routed resource.
    fn routed(routes: &Routes) -> Vec<(&str, &str, Vec<&str>, bool)> {
        let routed = routes.resources.iter();
        routed
            .map(|r| {
                let tools = r.tools.iter().map(String::as_str).collect();
                (r.uri.as_str(), r.namespace.as_str(), tools, r.listed.is_some())
            })
            .collect()
    }

    #[test]
    fn each_ui_uri_is_routed_to_the_one_source_that_names_it() {
        let weather = [entry("ui://weather/view.html"), entry("https://weather.example/x"), entry("ui://shared/x")];
        let maps = [entry("ui://maps/map.html"), entry("ui://shared/x"), entry("ui://maps/map.html")];
        let sources = [
            SourceUi {
                namespace: "weather",
                listed: &weather,
                links: vec![("weather.forecast", "ui://weather/view.html"), ("weather.radar", "ui://weather/radar")],
            },
            SourceUi { namespace: "maps", listed: &maps, links: vec![("maps.route", "ui://shared/x")] },
            SourceUi { namespace: "docs", listed: &[], links: vec![("docs.show", "not a ui uri")] },
            SourceUi { namespace: "third", listed: &[entry("ui://shared/x")], links: Vec::new() },
        ];
        let routes = route(&sources);
        assert_eq!(
            routed(&routes),
            [
                ("ui://maps/map.html", "maps", vec![], true),
                ("ui://weather/radar", "weather", vec!["weather.radar"], false),
                ("ui://weather/view.html", "weather", vec!["weather.forecast"], true),
            ]
        );
        let shared = vec!["weather".to_owned(), "maps".to_owned(), "third".to_owned()];
        assert_eq!(routes.ambiguous, BTreeMap::from([("ui://shared/x".to_owned(), shared)]));
        let cases = [
            ("ui://weather/view.html", Ok("weather")),
            ("ui://weather/radar", Ok("weather")),
            ("ui://maps/map.html", Ok("maps")),
            (
                "ui://shared/x",
                Err(UiResourceError::Ambiguous {
                    uri: "ui://shared/x".into(),
                    namespaces: "weather, maps, third".into(),
                }),
            ),
            ("ui://nobody", Err(UiResourceError::NotFound { uri: "ui://nobody".into() })),
            ("https://weather.example/x", Err(UiResourceError::NotFound { uri: "https://weather.example/x".into() })),
        ];
        for (uri, expected) in cases {
            assert_eq!(routes.find(uri).map(|r| r.namespace.as_str()), expected, "{uri}");
        }
    }

    #[test]
    fn a_uri_two_tools_of_one_source_link_is_one_resource() {
        let sources =
            [SourceUi { namespace: "w", listed: &[], links: vec![("w.a", "ui://w/view"), ("w.b", "ui://w/view")] }];
        assert_eq!(routed(&route(&sources)), [("ui://w/view", "w", vec!["w.a", "w.b"], false)]);
        assert_eq!(route(&[]), Routes::default());
    }
}

//! Toolkits end to end: `/mcp/toolkits/{name}` over the same test tools as
//! `/mcp` (`r.*` run, `w.*` need approval, search finds `gh.issues.list`),
//! configured through the sources file's `[[toolkits]]`.
//!
//! - `strict` shows `r.*`, `w.*` and `gh.*`; its policy asks before `r.*`
//!   (tighter than the source) and says `run` for `w.*` (looser: no effect);
//! - `reader` shows only `r.*`;
//! - `careful` shows only `w.*` and asks before each (as the source does, but as its own rule).
//!
//! Alice's scoped key is scoped to `strict`.

use std::path::Path;

use executor_catalog::CatalogConfig;
use executor_tests::raw_mcp;
use rmcp::model::{CallToolRequestParams, ElicitationAction, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::{Approver, Deployment, Place, Running, args, call, connect, native};

const TOOLKITS: &str = r#"
[[toolkits]]
name = "strict"
tools = ["r.*", "w.*", "gh.*"]
policy = { rules = [{ pattern = "r.*", action = "approve" }, { pattern = "w.*", action = "run" }] }

[[toolkits]]
name = "reader"
tools = ["r.*"]

[[toolkits]]
name = "careful"
tools = ["w.*"]
policy = { rules = [{ pattern = "w.*", action = "approve" }] }
"#;

async fn start(place: &Place) -> Running {
    let toolkits = CatalogConfig::from_toml_str(TOOLKITS, Path::new("executor.toml")).unwrap().toolkits;
    Running::start_with_toolkits(place, None, native(), &toolkits).await
}

fn endpoint(host: &Running, toolkit: &str) -> String {
    format!("{}/toolkits/{toolkit}", host.url)
}

const SEARCH: &str = "return await tools.search({query: 'issues'})";
const DESCRIBE: &str =
    "try { return await tools.describe.tool({path: 'gh.issues.list'}) } catch (e) { return 'threw: ' + e.message }";

pub(super) async fn a_toolkit_sees_only_its_tools_and_only_tightens(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = start(&place).await;
    let reader = host.client_at(&endpoint(&host, "reader"), &host.token, ProtocolVersion::V_2025_06_18).await;
    let strict = host.client_at(&endpoint(&host, "strict"), &host.token, ProtocolVersion::V_2025_11_25).await;
    let everything = host.client(ProtocolVersion::V_2025_06_18).await;

    // The description lists only the toolkit's namespaces.
    let listed = reader.list_tools(None).await.unwrap().tools;
    let description = listed[0].description.as_deref().unwrap();
    assert!(description.contains("Connected namespaces: r."), "{description}");

    // Its tools run; a tool outside it is as if it did not exist, and is not called.
    let (read, _) = call(&reader, "execute", json!({"code": "return (await tools.r.get({id: 1})).data"})).await;
    assert_eq!(read["result"], json!({"path": "r.get", "args": {"id": 1}}), "{read}");
    let (outside, _) = call(&reader, "execute", json!({"code": "return await tools.w.create({title: 'x'})"})).await;
    assert_eq!(outside["result"]["ok"], false, "{outside}");
    assert_eq!(outside["result"]["error"]["code"], "unknown_tool", "{outside}");
    assert_eq!(host.tools.calls().len(), 1, "only r.get reached the tools");

    // Search and describe see only the toolkit's tools.
    let (found, _) = call(&reader, "execute", json!({"code": SEARCH})).await;
    assert_eq!(found["result"], json!({"items": [], "total": 0}), "{found}");
    let (found, _) = call(&strict, "execute", json!({"code": SEARCH})).await;
    assert_eq!(found["result"]["total"], 1, "{found}");
    let (described, _) = call(&reader, "execute", json!({"code": DESCRIBE})).await;
    assert!(described["result"].to_string().contains("no tool `gh.issues.list`"), "{described}");
    let (described, _) = call(&strict, "execute", json!({"code": DESCRIBE})).await;
    assert!(described["result"].to_string().contains("declare function list"), "{described}");

    // Tighter: r.get runs on /mcp and pauses on `strict`.
    let (ran, _) = call(&everything, "execute", json!({"code": "return (await tools.r.get({})).ok"})).await;
    assert_eq!(ran["status"], "completed", "{ran}");
    let (paused, _) = call(&strict, "execute", json!({"code": "return (await tools.r.get({})).ok"})).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let message = paused["interaction"]["message"].as_str().unwrap();
    assert!(message.contains("toolkit `strict` rule `r.*`"), "{message}");
    // Looser: `w.* = run` does not skip the approval /mcp requires.
    let (asked, _) = call(&strict, "execute", json!({"code": super::WRITE})).await;
    assert_eq!(asked["status"], "waiting_for_interaction", "{asked}");
    assert_eq!(asked["interaction"]["message"], "w.create wants to write");
    assert_eq!(host.tools.calls().len(), 2, "nothing ran before its approval");

    // Accepted on the toolkit's endpoint, it runs once.
    let (done, _) = call(&strict, "resume", json!({"executionId": paused["executionId"], "action": "accept"})).await;
    assert_eq!(done["result"], true, "{done}");
    assert_eq!(host.tools.calls().len(), 3);
    // Another toolkit's endpoint does not know the execution.
    let (hidden, _) = call(&reader, "resume", json!({"executionId": asked["executionId"], "action": "accept"})).await;
    assert_eq!(hidden["error"]["code"], "execution_not_found", "{hidden}");
    assert_eq!(host.tools.calls().len(), 3);
    for client in [reader, strict, everything] {
        client.cancel().await.unwrap();
    }
    host.stop().await;
}

/// Each approval mode on a toolkit's endpoint; a continuation keeps the
/// toolkit's policy, whoever decides it (the link, the owner's JSON API, the
/// client's user, the model from `/mcp`).
pub(super) async fn a_toolkits_executions_continue_in_its_view_in_every_mode(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = start(&place).await;
    let strict = endpoint(&host, "strict");
    let http = executor_http_client::builder().build().unwrap();
    // Two reads: each pauses on `strict` (they would run on /mcp).
    let twice = "const a = await tools.r.get({n: 1}); const b = await tools.r.get({n: 2}); \
                 return [a.data.args.n, b.data.args.n]";

    // Browser: the first pause is decided at its link; the continuation
    // pauses again at the second read, as the toolkit says.
    let browser =
        host.client_at(&format!("{strict}?elicitation_mode=browser"), &host.token, ProtocolVersion::V_2025_06_18).await;
    let (paused, _) = call(&browser, "execute", json!({"code": twice})).await;
    assert_eq!(paused["status"], "user_approval_required", "{paused}");
    let link = paused["approvalUrl"].as_str().unwrap();
    let page = http.get(link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let csrf = cookie.strip_prefix("executor_csrf=").unwrap().to_owned();
    let token = link.split("token=").nth(1).unwrap();
    let form = format!("token={token}&decision=accept&csrf={csrf}");
    let decided = http
        .post(link.split('?').next().unwrap())
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &cookie)
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200);
    assert_eq!(host.tools.calls().len(), 1, "the approved read ran; the second waits");

    // The JSON API, with the scoped key: sees and decides its toolkit's execution.
    let api = host.url.replace("/mcp", &format!("/api/executions/{}", paused["executionId"].as_str().unwrap()));
    let scoped = host.scoped.clone().unwrap();
    let again: Value = http.get(&api).bearer_auth(&scoped).send().await.unwrap().json().await.unwrap();
    assert_eq!(again["interaction"]["args"], json!({"n": 2}), "paused at the second read: {again}");
    let resumed = http
        .post(format!("{api}/resume"))
        .bearer_auth(&scoped)
        .json(&json!({"action": "accept"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let resumed: Value = resumed.json().await.unwrap();
    assert_eq!(resumed["result"], json!([1, 2]), "{resumed}");
    assert_eq!(host.tools.calls().len(), 2);

    // Model mode, decided from /mcp by the same (unscoped) owner: still the toolkit's view.
    let model = host.client_at(&strict, &host.token, ProtocolVersion::V_2026_07_28).await;
    let (paused, _) = call(&model, "execute", json!({"code": twice})).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let everything = host.client(ProtocolVersion::V_2025_06_18).await;
    let (next, _) =
        call(&everything, "resume", json!({"executionId": paused["executionId"], "action": "accept"})).await;
    assert_eq!(next["status"], "waiting_for_interaction", "the second read asks again: {next}");
    // An execution started on /mcp is not the scoped key's to see.
    let (elsewhere, _) = call(&everything, "execute", json!({"code": super::WRITE})).await;
    let foreign = host.url.replace("/mcp", &format!("/api/executions/{}", elsewhere["executionId"].as_str().unwrap()));
    let refused = http.get(&foreign).bearer_auth(&scoped).send().await.unwrap();
    assert_eq!(refused.status(), 404);
    assert_eq!(http.get(&foreign).bearer_auth(&host.token).send().await.unwrap().status(), 200);

    // Native: the client's user answers each pause; two answers, two reads.
    let approver = Approver { answer: ElicitationAction::Accept, content: None, asked: Default::default() };
    let asked = approver.asked.clone();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{strict}?elicitation_mode=native"))
        .auth_header(host.token.clone());
    let transport =
        StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config);
    let native = connect(approver, transport, ProtocolVersion::V_2026_07_28).await;
    let before = host.tools.calls().len();
    let done = native
        .call_tool(CallToolRequestParams::new("execute").with_arguments(args(json!({"code": twice}))))
        .await
        .unwrap();
    assert_eq!(done.structured_content.unwrap()["result"], json!([1, 2]));
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "asked before each read: {asked:?}");
    assert!(asked[0].contains("toolkit `strict`"), "{asked:?}");
    assert_eq!(host.tools.calls().len(), before + 2);
    for client in [browser, model, everything] {
        client.cancel().await.unwrap();
    }
    host.stop().await;
}

/// A key scoped to `strict`: 403 naming the toolkit on `/mcp` and on
/// `reader`; an unknown toolkit is 404 for anyone.
pub(super) async fn a_scoped_key_works_only_on_its_toolkit(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = start(&place).await;
    let scoped = host.scoped.clone().unwrap();
    let http = executor_http_client::builder().build().unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let post = |url: String, token: String| raw_mcp::post_in(&http, &url, &token, None, &list).send();

    for url in [host.url.clone(), endpoint(&host, "reader")] {
        let refused = post(url.clone(), scoped.clone()).await.unwrap();
        assert_eq!(refused.status(), 403, "{url}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["jsonrpc"], "2.0");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("toolkit `strict`") && message.contains("/mcp/toolkits/strict"), "{message}");
        assert_eq!(post(url, host.token.clone()).await.unwrap().status(), 200, "an unscoped key works everywhere");
    }
    assert_eq!(post(endpoint(&host, "strict"), scoped.clone()).await.unwrap().status(), 200);
    for token in [&scoped, &host.token] {
        let unknown = post(endpoint(&host, "nope"), token.clone()).await.unwrap();
        assert_eq!(unknown.status(), 404);
        let body: Value = unknown.json().await.unwrap();
        assert!(body["error"]["message"].as_str().unwrap().contains("no toolkit `nope`"), "{body}");
    }

    // Over MCP: the scoped key's client works on its toolkit.
    let client = host.client_at(&endpoint(&host, "strict"), &scoped, ProtocolVersion::V_2025_06_18).await;
    let (read, _) = call(&client, "execute", json!({"code": "return 40 + 2"})).await;
    assert_eq!(read["result"], 42);
    client.cancel().await.unwrap();
    host.stop().await;
}

/// A key scoped to `strict` cannot reach past it: its "always allow" is
/// `strict`'s grant only, it cannot use or end a session of another
/// endpoint, and its refusals say `forbidden_scope`. A grant given on `/mcp`
/// loosens what the source asks, never a toolkit's own `approve`.
pub(super) async fn a_scoped_key_cannot_reach_past_its_toolkit(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = start(&place).await;
    let scoped = host.scoped.clone().unwrap();
    let http = executor_http_client::builder().build().unwrap();
    let api = |path: &str| host.url.replace("/mcp", path);
    let remember = json!({"action": "accept", "remember": "always"});

    // The scoped key's "always allow" on its toolkit's pause is a grant of that toolkit.
    let strict = host.client_at(&endpoint(&host, "strict"), &scoped, ProtocolVersion::V_2025_06_18).await;
    let (paused, _) = call(&strict, "execute", json!({"code": super::WRITE})).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let decide = |id: &Value, key: &str| {
        http.post(api(&format!("/api/executions/{}/resume", id.as_str().unwrap())))
            .bearer_auth(key.to_owned())
            .json(&remember)
            .send()
    };
    assert_eq!(decide(&paused["executionId"], &scoped).await.unwrap().status(), 200);
    assert_eq!(host.tools.calls().len(), 1);
    let grants: Value =
        http.get(api("/api/grants")).bearer_auth(&host.token).send().await.unwrap().json().await.unwrap();
    assert_eq!(grants["grants"].as_array().unwrap().len(), 1, "{grants}");
    assert_eq!(grants["grants"][0]["tool"], "w.create", "{grants}");
    assert_eq!(grants["grants"][0]["toolkit"], "strict", "{grants}");
    // It applies on `strict`...
    let (ran, _) = call(&strict, "execute", json!({"code": super::WRITE})).await;
    assert_eq!(ran["status"], "completed", "{ran}");
    assert_eq!(host.tools.calls().len(), 2);
    // ...and nowhere else: the owner's own /mcp still asks.
    let everything = host.client(ProtocolVersion::V_2025_06_18).await;
    let (asked, _) = call(&everything, "execute", json!({"code": super::WRITE})).await;
    assert_eq!(asked["status"], "waiting_for_interaction", "a toolkit's grant loosened /mcp: {asked}");
    assert_eq!(host.tools.calls().len(), 2);

    // A grant given on /mcp runs the write there, but not where a toolkit's own rule asks.
    assert_eq!(decide(&asked["executionId"], &host.token).await.unwrap().status(), 200);
    assert_eq!(host.tools.calls().len(), 3);
    let (ran, _) = call(&everything, "execute", json!({"code": super::WRITE})).await;
    assert_eq!(ran["status"], "completed", "{ran}");
    assert_eq!(host.tools.calls().len(), 4);
    let careful = host.client_at(&endpoint(&host, "careful"), &host.token, ProtocolVersion::V_2025_06_18).await;
    let (still, _) = call(&careful, "execute", json!({"code": super::WRITE})).await;
    assert_eq!(still["status"], "waiting_for_interaction", "a /mcp grant loosened a toolkit's approve: {still}");
    assert!(still["interaction"]["message"].as_str().unwrap().contains("toolkit `careful`"), "{still}");
    assert_eq!(host.tools.calls().len(), 4);

    // Sessions belong to their endpoint: /mcp's session is unknown on `strict`, to any key.
    let rpc = |url: String, key: &str, session: &str, body: Value| {
        raw_mcp::post_in(&http, &url, key, Some(session), &body).send()
    };
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let started = raw_mcp::post(&http, &host.url, &host.token, &raw_mcp::initialize("raw")).send().await.unwrap();
    let session = started.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    for key in [&scoped, &host.token] {
        let used = rpc(endpoint(&host, "strict"), key, &session, list.clone()).await.unwrap();
        assert_eq!(used.status(), 404, "another endpoint's session was used");
        let ended = http
            .delete(endpoint(&host, "strict"))
            .bearer_auth(key)
            .header("mcp-session-id", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(ended.status(), 404, "another endpoint's session was ended");
    }
    assert_eq!(rpc(host.url.clone(), &host.token, &session, list.clone()).await.unwrap().status(), 200);

    // A scoped key's refusal on the owner's own routes says what happened.
    for path in ["/api/grants", "/api/connections"] {
        let refused = http.get(api(path)).bearer_auth(&scoped).send().await.unwrap();
        assert_eq!(refused.status(), 403, "{path}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "forbidden_scope", "{path}: {body}");
    }
    for client in [strict, everything, careful] {
        client.cancel().await.unwrap();
    }
    host.stop().await;
}

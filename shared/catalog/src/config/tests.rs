use super::*;
use std::path::Path;

fn load(text: &str) -> Result<CatalogConfig, ConfigError> {
    CatalogConfig::from_toml_str(text, Path::new("/etc/executor.toml"))
}

#[test]
fn a_complete_file_loads() {
    let config = load(
            r#"
            [outbound]
            allow_loopback = true
            timeout_ms = 5000

            [[sources]]
            namespace = "github"
            kind = "openapi"
            spec = "specs/github.yaml"
            base_url = "https://api.example.test"
            auth = { type = "bearer", token = "env:GITHUB_TOKEN" }
            headers = { "X-Team" = "core", "X-Key" = "env:KEY" }
            policy = { default = "approve", rules = [{ pattern = "github.issues.*", action = "run" }] }

            [[sources]]
            namespace = "docs"
            kind = "mcp"
            url = "https://mcp.example.test/mcp"
            auth = { type = "api_key", name = "X-Api-Key", in = "header", value = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:docs-AbCdEf" }
            "#,
        )
        .unwrap();
    assert!(config.outbound.allow_loopback);
    assert_eq!(config.outbound.timeout, Duration::from_secs(5));
    let github = &config.sources[0];
    assert_eq!(
        github.kind,
        SourceKind::OpenApi {
            spec: SpecLocation::File("/etc/specs/github.yaml".into()),
            base_url: Url::parse("https://api.example.test").unwrap()
        }
    );
    assert_eq!(github.auth, Some(Auth::Bearer { token: SecretRef::Env("GITHUB_TOKEN".into()) }));
    assert_eq!(github.headers["X-Team"], HeaderValue::Literal("core".into()));
    assert_eq!(github.headers["X-Key"], HeaderValue::Secret(SecretRef::Env("KEY".into())));
    assert_eq!(github.policy.rules.len(), 1);
    assert!(matches!(config.sources[1].auth, Some(Auth::ApiKey { location: ApiKeyLocation::Header, .. })));
}

#[test]
fn the_example_file_is_valid() {
    let config = load(include_str!("../../../../executor.example.toml")).unwrap();
    let namespaces: Vec<&str> = config.sources.iter().map(|s| s.namespace.as_str()).collect();
    assert_eq!(namespaces, ["github", "billing", "docs", "tracker", "crm"]);
    assert!(matches!(&config.sources[4].auth, Some(Auth::OAuth2(o)) if o.refresh_scope.is_some()));
    assert!(matches!(config.sources[3].kind, SourceKind::Graphql { schema: Some(_), .. }));
    assert!(matches!(&config.sources[3].auth, Some(Auth::OAuth2ClientCredentials { scopes, .. }) if scopes.len() == 2));
    assert_eq!(config.toolkits[0].name.as_str(), "support");
    assert!(config.toolkits[0].includes("github.issues.create") && !config.toolkits[0].includes("billing.x"));
    let bot = Principal::parse("ci-bot").unwrap();
    assert_eq!(config.quotas[&bot].executions_per_hour, Some(1000));
}

#[test]
fn toolkit_and_quota_mistakes_name_the_file_the_toolkit_and_the_field() {
    let cases = [
        ("[[toolkits]]\nname = \"Support\"\ntools = [\"a.*\"]", "toolkit `Support`, field `name`"),
        ("[[toolkits]]\nname = \"s\"\ntools = []", "toolkit `s`, field `tools`: must list"),
        ("[[toolkits]]\nname = \"s\"\ntools = [\"a b\"]", "toolkit `s`, field `tools`: tool pattern `a b`"),
        (
            "[[toolkits]]\nname = \"s\"\ntools = [\"a.*\"]\npolicy = { default = \"sometimes\" }",
            "toolkit `s`, field `policy`",
        ),
        (
            "[[toolkits]]\nname = \"s\"\ntools = [\"a.*\"]\n[[toolkits]]\nname = \"s\"\ntools = [\"b.*\"]",
            "toolkit `s`, field `name`: another toolkit",
        ),
        ("[[toolkits]]\nname = \"s\"\ntools = [\"a.*\"]\nfilter = 1", "unknown field `filter`"),
        ("[quotas.\"a\\nb\"]\nexecutions_per_hour = 1", "[quotas] owner \"a\\nb\""),
        ("[quotas.alice]\nexecutions_per_day = 1", "unknown field `executions_per_day`"),
    ];
    for (text, expected) in cases {
        let message = load(text).unwrap_err().to_string();
        assert!(message.starts_with("/etc/executor.toml"), "{message}");
        assert!(message.contains(expected), "expected `{expected}` in: {message}");
    }
}

#[test]
fn a_per_owner_oauth_source_loads() {
    let config = load(
            r#"
            [[sources]]
            namespace = "crm"
            kind = "openapi"
            spec = "crm.json"
            base_url = "https://crm.test"
            auth = { type = "oauth2", authorization_url = "https://id.test/authorize", token_url = "https://id.test/token", client_id = "executor", client_secret = "env:CRM_SECRET", scopes = ["contacts.read"], refresh_scope = "offline_access" }
            "#,
        )
        .unwrap();
    let Some(Auth::OAuth2(oauth)) = &config.sources[0].auth else { panic!("{:?}", config.sources[0].auth) };
    assert_eq!(oauth.authorization_url.as_str(), "https://id.test/authorize");
    assert!(oauth.client_secret.is_some());
    assert_eq!(oauth.requested_scopes(), ["contacts.read", "offline_access"]);
    // A public client: no secret.
    let public = load(
            r#"
            [[sources]]
            namespace = "crm"
            kind = "graphql"
            url = "https://crm.test/graphql"
            schema = "crm.graphql"
            auth = { type = "oauth2", authorization_url = "https://id.test/authorize", token_url = "https://id.test/token", client_id = "executor" }
            "#,
        )
        .unwrap();
    assert!(
        matches!(&public.sources[0].auth, Some(Auth::OAuth2(o)) if o.client_secret.is_none() && o.requested_scopes().is_empty())
    );
}

/// Each mistake's message starts with the file, contains `expected`, and never echoes a secret.
fn assert_named(cases: Vec<(String, &str)>) {
    for (text, expected) in cases {
        let message = load(&text).unwrap_err().to_string();
        assert!(message.starts_with("/etc/executor.toml"), "{message}");
        assert!(message.contains(expected), "expected `{expected}` in: {message}");
        assert!(!message.contains("hunter2"), "a secret written in the file is not echoed: {message}");
    }
}

#[test]
fn mistakes_name_the_file_the_source_and_the_field() {
    let source = |body: &str| format!("[[sources]]\nnamespace = \"gh\"\n{body}");
    assert_named(vec![
        (source("kind = \"openapi\"\nbase_url = \"https://x.test\""), "source `gh`, field `spec`: is required"),
        (source("kind = \"mcp\""), "field `url`: is required"),
        (
            source("kind = \"mcp\"\nurl = \"ftp://u:hunter2@x.test/?k=hunter2\""),
            "field `url`: `ftp://x.test/` must be an http(s) URL",
        ),
        (source("kind = \"mcp\"\nurl = \"https://x.test:99999/?k=hunter2\""), "field `url`: is not a URL"),
        (
            source(
                "kind = \"mcp\"\nurl = \"https://x.test\"\nauth = { type = \"api_key\", name = \"a;b\", in = \"cookie\", value = \"env:K\" }",
            ),
            "field `auth.name`: `a;b` is not a valid cookie name",
        ),
        (source("kind = \"mcp\"\nurl = \"https://x.test\"\nspec = \"a.json\""), "field `spec`: does not apply"),
        (
            source("kind = \"mcp\"\nurl = \"https://x.test\"\nauth = { type = \"bearer\", token = \"hunter2\" }"),
            "field `auth.token`: a secret must be a reference",
        ),
        (
            "[[sources]]\nnamespace = \"search\"\nkind = \"mcp\"\nurl = \"https://x.test\"".into(),
            "source `search`, field `namespace`: `search` is reserved",
        ),
        (
            "[[sources]]\nnamespace = \"my-api\"\nkind = \"mcp\"\nurl = \"https://x.test\"".into(),
            "field `namespace`: must be an identifier",
        ),
        (
            format!("{0}\n{0}", source("kind = \"mcp\"\nurl = \"https://x.test\"")),
            "field `namespace`: another source already uses",
        ),
        (source("kind = \"mcp\"\nurl = \"https://x.test\"\nspek = 1"), "unknown field `spek`"),
        (source("kind = \"graphql\""), "source `gh`, field `url`: is required for kind = \"graphql\""),
        (
            source("kind = \"graphql\"\nurl = \"https://x.test\"\nspec = \"a.json\""),
            "field `spec`: does not apply to kind = \"graphql\"",
        ),
        (source("kind = \"openapi\"\nschema = \"s.json\""), "field `schema`: does not apply"),
    ]);
    let missing = CatalogConfig::load(Path::new("/nonexistent/executor.toml")).unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/executor.toml"), "{missing}");
}

#[test]
fn mistakes_in_a_sources_auth_name_the_field() {
    let source = |body: &str| format!("[[sources]]\nnamespace = \"gh\"\n{body}");
    let oauth = |secret: &str, scopes: &str| {
        format!(
            "auth = {{ type = \"oauth2_client_credentials\", token_url = \"https://auth.x.test/token\", client_id = \"c\", client_secret = \"{secret}\", scopes = {scopes} }}"
        )
    };
    let per_owner = |extra: &str| {
        format!(
            "auth = {{ type = \"oauth2\", authorization_url = \"https://a.test/authorize\", token_url = \"https://a.test/token\", client_id = \"c\", {extra} }}"
        )
    };
    let openapi = "kind = \"openapi\"\nspec = \"a.json\"\nbase_url = \"https://x.test\"";
    assert_named(vec![
        (
            source(&format!("kind = \"graphql\"\nurl = \"https://x.test\"\n{}", oauth("hunter2", "[\"read\"]"))),
            "field `auth.client_secret`: a secret must be a reference",
        ),
        (
            source(&format!("kind = \"graphql\"\nurl = \"https://x.test\"\n{}", oauth("env:S", "[\"a b\"]"))),
            "field `auth.scopes`: \"a b\" is not a scope",
        ),
        (
            source(&format!("kind = \"mcp\"\nurl = \"https://x.test\"\n{}", oauth("env:S", "[]"))),
            "field `auth.type`: `oauth2_client_credentials` is not supported for kind = \"mcp\"",
        ),
        (
            source(
                "kind = \"graphql\"\nurl = \"https://x.test\"\nauth = { type = \"oauth2_client_credentials\", token_url = \"ftp://x.test/?k=hunter2\", client_id = \"c\", client_secret = \"env:S\" }",
            ),
            "field `auth.token_url`: `ftp://x.test/` must be an http(s) URL",
        ),
        (
            source(
                "kind = \"graphql\"\nurl = \"https://x.test\"\nauth = { type = \"oauth2_client_credentials\", token_url = \"https://x.test\", client_secret = \"env:S\" }",
            ),
            "missing field `client_id`",
        ),
        (
            source(
                "kind = \"mcp\"\nurl = \"https://x.test\"\npolicy = { rules = [{ pattern = \"a b\", action = \"run\" }] }",
            ),
            "`a b`",
        ),
        (
            source(&format!("kind = \"graphql\"\nurl = \"https://x.test\"\n{}", per_owner("scopes = [\"r\"]"))),
            "field `schema`: is required with auth type `oauth2`",
        ),
        (
            source(&format!("kind = \"mcp\"\nurl = \"https://x.test\"\n{}", per_owner("scopes = []"))),
            "field `auth.type`: `oauth2` is not supported for kind = \"mcp\"",
        ),
        (
            source(&format!("{openapi}\n{}", per_owner("refresh_scope = \"offline access\""))),
            "field `auth.refresh_scope`: \"offline access\" is not a scope",
        ),
        (
            source(&format!("{openapi}\n{}", per_owner("client_secret = \"hunter2\""))),
            "field `auth.client_secret`: a secret must be a reference",
        ),
        (
            source(&format!(
                "{openapi}\nauth = {{ type = \"oauth2\", authorization_url = \"ftp://a.test/?k=hunter2\", token_url = \"https://a.test/t\", client_id = \"c\" }}"
            )),
            "field `auth.authorization_url`: `ftp://a.test/` must be an http(s) URL",
        ),
    ]);
}

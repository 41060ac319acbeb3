// A real OpenID Provider for the console's OIDC sign-in tests: panva's
// certified oidc-provider, on plain http://127.0.0.1 (tests/src/oidc_provider.rs).
// Pinned to 8.8.1, the last release whose runtime check accepts Node.js 20
// (every 9.x warns "Unsupported runtime" below Node.js 22).
//
//   node server.mjs --client-id ID --redirect-uri URI [--redirect-uri URI2 ...] [--port 0]
//
// Listens on 127.0.0.1 (a free port with --port 0, the default), issuer
// http://127.0.0.1:PORT, and prints one line, {"issuer":"http://127.0.0.1:PORT"},
// once listening. Exits when its stdin closes, so it never outlives the test
// that started it. Anything else (the provider's warnings, errors) goes to stderr.
//
// One public client: client_id ID, the given redirect URIs, no secret
// (token_endpoint_auth_method "none"), the authorization code flow only,
// PKCE required with S256 (the only method offered). ID tokens are RS256,
// signed with a key made at start (served at the discovery document's
// jwks_uri); their aud is ID and they carry the request's nonce.
//
// Signing in (the provider's development interactions), in a fresh browser:
//   1. GET /auth?... redirects to /interaction/<uid>: heading <h1>Sign-in</h1>,
//      one form with <input type="text" name="login"> (any login name; it
//      becomes the ID token's sub), <input type="password" name="password">
//      (required by the form, any value, never checked) and
//      <button type="submit">Sign-in</button>.
//   2. Then always a consent page, another /interaction/<uid>: heading
//      <h1>Authorize</h1>, one form with only <button type="submit">Continue</button>
//      (the account has not yet granted this client `openid`).
//   3. Then a redirect to the redirect URI with ?code=...&state=...&iss=<issuer>.
// Every page's <title> is "Sign-in". A later authorization request in the
// same browser (the provider's session cookie `_session` lives on, as does
// the grant) skips both pages and redirects straight back; prompt=login brings
// back the Sign-in page. A request without PKCE is refused (a redirect with
// error=invalid_request). The cookies are SameSite=Lax, HttpOnly, signed and,
// on http, not Secure, so Chromium keeps them on http://127.0.0.1.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import { parseArgs } from 'node:util';
import Provider from 'oidc-provider';

const { values } = parseArgs({
  options: {
    'client-id': { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    port: { type: 'string', default: '0' },
  },
});
const clientId = values['client-id'];
const redirectUris = values['redirect-uri'] ?? [];
if (!clientId || redirectUris.length === 0) {
  console.error('usage: node server.mjs --client-id ID --redirect-uri URI [--port 0]');
  process.exit(2);
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

function configuration() {
  return {
    clients: [
      {
        client_id: clientId,
        redirect_uris: redirectUris,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        id_token_signed_response_alg: 'RS256',
      },
    ],
    responseTypes: ['code'],
    jwks: { keys: [signingKey] },
    enabledJWA: { idTokenSigningAlgValues: ['RS256'] },
    pkce: { methods: ['S256'], required: () => true },
    scopes: ['openid'],
    claims: { openid: ['sub'] },
    // Whoever signs in is the account named by the login they typed.
    async findAccount(ctx, sub) {
      return { accountId: sub, async claims() { return { sub }; } };
    },
    // The long-lived cookies default to SameSite=None, which Chromium drops
    // without Secure, and Secure is only set on https: Lax works on http.
    cookies: {
      keys: [randomBytes(32).toString('base64url')],
      long: { httpOnly: true, sameSite: 'lax' },
      short: { httpOnly: true, sameSite: 'lax' },
    },
    features: {
      devInteractions: { enabled: true },
    },
    ttl: {
      AuthorizationCode: 60,
      IdToken: 3600,
      AccessToken: 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
    },
  };
}

// Bind first to learn the port: the issuer must name it.
const server = http.createServer();
server.listen(Number(values.port), '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, configuration());
  for (const event of ['server_error', 'authorization.error', 'grant.error']) {
    provider.on(event, (ctx, error) => console.error(`${event}: ${error?.message} ${error?.error_description ?? ''}`));
  }
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();

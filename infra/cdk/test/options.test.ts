// Options: context parsing, validation, the build check, the sources layer.

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { Asset } from 'aws-cdk-lib/aws-s3-assets';

import { bootstrapDir } from '../lib/executor-stack';
import { optionsFromContext, resolve } from '../lib/options';
import { FILE_FIELDS, readSources } from '../lib/sources';
import { PROJECT_DIR, placeholderAssets, resources, synth, tempDir } from './helpers';

describe('context', () => {
  const from = (context: Record<string, unknown>) => optionsFromContext((key) => context[key]);

  test('-c strings and cdk.json values give the same options', () => {
    const arns = [
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:a-AbCdEf',
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:b-123456',
    ];
    assert.deepEqual(from({ secretArns: arns.join(', '), logRetentionDays: '90', sessionTimeoutMs: '60000' }), {
      secretArns: arns,
      logRetentionDays: 90,
      sessionTimeoutMs: 60000,
    });
    assert.deepEqual(
      from({ secretArns: arns, logRetentionDays: 90, sessionTimeoutMs: 60000 }),
      from({
        secretArns: JSON.stringify(arns),
        logRetentionDays: '90',
        sessionTimeoutMs: '60000',
      }),
    );
  });

  test('empty values are unset; unknown keys are ignored', () => {
    assert.deepEqual(from({ config: '', domainName: undefined, somethingElse: 'x' }), {});
    assert.deepEqual(from({ architecture: ' x86_64 ', removalPolicy: 'destroy' }), {
      architecture: 'x86_64',
      removalPolicy: 'destroy',
    });
  });

  test('numbers must be positive whole numbers', () => {
    for (const bad of ['abc', '-1', '1.5', '0']) {
      assert.throws(() => from({ pausedLeaseMs: bad }), /context pausedLeaseMs: expected a positive whole number/);
      assert.throws(() => from({ consoleSessionMs: bad }), /context consoleSessionMs: expected a positive whole number/);
    }
  });

  test("the console's client id and session length", () => {
    assert.deepEqual(from({ consoleClientId: ' executor-console ', consoleSessionMs: '3600000' }), {
      consoleClientId: 'executor-console',
      consoleSessionMs: 3_600_000,
    });
    assert.deepEqual(from({ consoleClientId: '', consoleSessionMs: '' }), {});
  });
});

describe('validation', () => {
  const cases: [string, object, RegExp][] = [
    ['architecture', { architecture: 'x86' }, /architecture: expected arm64 or x86_64/],
    ['audit retention', { auditRetentionDays: 0 }, /auditRetentionDays: 0 is outside 1 to 3650 days/],
    ['audit retention too long', { auditRetentionDays: 4000 }, /auditRetentionDays: 4000 is outside/],
    ['removal policy', { removalPolicy: 'keep' }, /removalPolicy: expected retain or destroy/],
    ['domain without certificate', { domainName: 'mcp.example.com' }, /domainName and certificateArn go together/],
    [
      'certificate without domain',
      { certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/abc' },
      /go together/,
    ],
    [
      'certificate ARN',
      { domainName: 'a.example', certificateArn: 'arn:aws:iam::1:role/x' },
      /not an ACM certificate ARN/,
    ],
    ['issuer without audience', { oidcIssuer: 'https://idp.example' }, /oidcIssuer and oidcAudience go together/],
    ['JWKS URL without issuer', { oidcJwksUrl: 'https://idp.example/jwks' }, /need oidcIssuer/],
    [
      'console client without issuer',
      { consoleClientId: 'executor-console' },
      /consoleClientId needs oidcIssuer and oidcAudience/,
    ],
    [
      'empty console client',
      { oidcIssuer: 'https://idp.example', oidcAudience: 'executor', consoleClientId: ' ' },
      /consoleClientId: expected an OIDC client id, got " "/,
    ],
    ['console session of 0 ms', { consoleSessionMs: 0 }, /consoleSessionMs: expected a positive whole number/],
    ['negative console session', { consoleSessionMs: -1 }, /consoleSessionMs: expected a positive whole number/],
    ['fractional console session', { consoleSessionMs: 1.5 }, /consoleSessionMs: expected a positive whole number/],
    [
      'partial secret ARN',
      { secretArns: ['arn:aws:secretsmanager:eu-west-1:123456789012:secret:github-token'] },
      /not a complete Secrets Manager secret ARN/,
    ],
    ['secret name', { secretArns: ['github-token'] }, /not a complete Secrets Manager secret ARN/],
    ['log retention', { logRetentionDays: 10 }, /logRetentionDays: 10 is not a CloudWatch Logs retention/],
    ['approval wait', { approvalWaitMs: 28_000 }, /approvalWaitMs: 28000 is over 25000/],
    ['elicitation mode', { elicitationMode: 'pigeon' }, /elicitationMode: expected model, browser or native/],
  ];
  for (const [name, options, message] of cases) {
    test(name, () => assert.throws(() => resolve(options), message));
  }

  test('a stack name too long for the alarm function name', () => {
    assert.throws(() => synth({}, 'S'.repeat(60)), /too long: Lambda function names are at most 64 characters/);
  });
});

describe('builds', () => {
  // ELF header: magic, class 64-bit, little-endian, ..., e_machine at byte 18.
  const elf = (machine: number) => {
    const header = Buffer.alloc(64);
    header.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0);
    header.writeUInt16LE(machine, 18);
    return header;
  };

  test('a function ships its bootstrap and nothing else', () => {
    const assets = placeholderAssets();
    fs.writeFileSync(path.join(assets, 'mcp-function', 'bootstrap.zip'), 'zip');
    const { stack, outdir } = synth({ assetDir: assets });
    const code = stack.mcpFunction.node.findChild('Code') as Asset;
    assert.deepEqual(fs.readdirSync(path.join(outdir, code.assetPath)), ['bootstrap']);
  });

  test('a missing build names the command that makes it', () => {
    const empty = tempDir('empty');
    assert.throws(() => bootstrapDir(empty, 'mcp-function', 'arm64'), /cargo lambda build --profile lambda --arm64/);
    assert.throws(() => synth({ assetDir: empty }), /no Lambda build of/);
  });

  test('an ELF build must match the architecture', () => {
    const x86 = placeholderAssets(elf(0x3e));
    const arm = placeholderAssets(elf(0xb7));
    assert.equal(bootstrapDir(x86, 'mcp-function', 'x86_64'), path.join(x86, 'mcp-function'));
    assert.equal(bootstrapDir(arm, 'mcp-function', 'arm64'), path.join(arm, 'mcp-function'));
    assert.throws(
      () => bootstrapDir(x86, 'mcp-function', 'arm64'),
      /built for x86_64, but the functions are deployed as arm64/,
    );
    assert.throws(() => synth({ assetDir: arm, architecture: 'x86_64' }), /built for arm64/);
  });
});

describe('sources file', () => {
  const SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:github-token-AbCdEf';
  const sourcesDir = (toml: string, files: Record<string, string> = {}) => {
    const dir = tempDir('sources');
    fs.writeFileSync(path.join(dir, 'executor.toml'), toml);
    for (const [name, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), content);
    }
    return path.join(dir, 'executor.toml');
  };
  const GITHUB = `
[[sources]]
namespace = "github"
kind = "openapi"
spec = "specs/github.yaml"
base_url = "https://api.github.example"
auth = { type = "bearer", token = "${SECRET}" }

[[sources]]
namespace = "billing"
kind = "openapi"
spec = "https://billing.example/openapi.json"
base_url = "https://billing.example/api"
`;

  test('ships as a layer under /opt/executor with its local specs; EXECUTOR_CONFIG points at it', () => {
    const config = sourcesDir(GITHUB, {
      'specs/github.yaml': 'openapi: 3.0.0\n',
      'notes.txt': 'not shipped',
      'node_modules/junk': 'not shipped',
    });
    const { stack, rendered, outdir } = synth({ config, secretArns: [SECRET], architecture: 'x86_64' });
    const layer = rendered.Resources.ConfigLayer.Properties;
    assert.deepEqual(layer.CompatibleRuntimes, ['provided.al2023']);
    assert.deepEqual(layer.CompatibleArchitectures, ['x86_64']);
    for (const name of ['McpFunction', 'ApprovalFunction']) {
      const fn = rendered.Resources[name].Properties;
      assert.equal(fn.Environment.Variables.EXECUTOR_CONFIG, '/opt/executor/executor.toml', name);
      assert.deepEqual(fn.Layers, ['${ConfigLayer}'], name);
    }
    const alarm = rendered.Resources.AlarmFunction.Properties;
    assert.equal(alarm.Environment.Variables.EXECUTOR_CONFIG, undefined);
    assert.equal(alarm.Layers, undefined);
    assert.equal(Object.keys(resources(rendered, 'AWS::Lambda::LayerVersion')).length, 1);

    const asset = stack.configLayer!.node.findChild('Code') as Asset;
    assert.deepEqual(listFiles(path.join(outdir, asset.assetPath)), [
      'executor/executor.toml',
      'executor/specs/github.yaml',
    ]);
  });

  test('the catalog index it names ships with it; one that is missing fails the synth', () => {
    const withIndex = `index = "build/catalog.index"\n${GITHUB}`;
    const config = sourcesDir(withIndex, { 'specs/github.yaml': '', 'build/catalog.index': '' });
    assert.deepEqual(readSources(path.dirname(config), 'executor.toml').files, [
      'executor.toml',
      'specs/github.yaml',
      'build/catalog.index',
    ]);
    assert.throws(
      () => readSources(path.dirname(sourcesDir(withIndex, { 'specs/github.yaml': '' })), 'executor.toml'),
      /catalog index file .*build\/catalog.index does not exist/,
    );
    const outside = sourcesDir(withIndex.replace('build/catalog.index', '../catalog.index'), { 'specs/github.yaml': '' });
    assert.throws(() => readSources(path.dirname(outside), 'executor.toml'), /catalog index "..\/catalog.index" must be a path below/);
  });

  test('a secret it names must be granted; a partial ARN matches its complete one', () => {
    const config = sourcesDir(GITHUB, { 'specs/github.yaml': '' });
    assert.throws(
      () => synth({ config }),
      /config names secrets the functions could not read: arn:aws:secretsmanager:.*github-token-AbCdEf/,
    );
    const partial = sourcesDir(GITHUB.replace(SECRET, SECRET.slice(0, -7)), { 'specs/github.yaml': '' });
    assert.doesNotThrow(() => readSources(path.dirname(partial), 'executor.toml'));
    synth({ config: partial, secretArns: [SECRET] });
    assert.throws(
      () => synth({ config: partial, secretArns: [SECRET.replace('github-token', 'github-token-old')] }),
      /could not read/,
    );
  });

  test('mistakes fail the synth', () => {
    assert.throws(() => synth({ config: path.join(tempDir('none'), 'executor.toml') }), /config: no sources file at/);
    assert.throws(() => synth({ config: sourcesDir('[[sources]\n') }), /is not valid TOML/);
    assert.throws(
      () => synth({ config: sourcesDir(GITHUB), secretArns: [SECRET] }),
      /spec file .*specs\/github.yaml does not exist/,
    );
    for (const spec of ['../specs/github.yaml', '/etc/github.yaml']) {
      assert.throws(
        () => synth({ config: sourcesDir(GITHUB.replace('specs/github.yaml', spec)), secretArns: [SECRET] }),
        /must be a path below/,
      );
    }
  });

  test('the example sources file, with its Cedar lines commented out and in', () => {
    const root = path.join(PROJECT_DIR, '..', '..');
    const example = fs.readFileSync(path.join(root, 'executor.example.toml'), 'utf8');
    const placeholders = { 'specs/github.yaml': '', 'specs/crm.yaml': '', 'schemas/tracker.json': '' };
    // The Cedar files it names (relative to the repository root, where it is): the repository's examples.
    const withPolicies = (toml: string) => {
      const named = [...toml.matchAll(/^cedar = "(.*)"$/gm)].map((m) => m[1]);
      const files = Object.fromEntries(named.map((name) => [name, fs.readFileSync(path.join(root, name), 'utf8')]));
      return { config: sourcesDir(toml, { ...placeholders, ...files }), named };
    };
    // The GraphQL source's `schema` ships too: without it the functions would introspect instead.
    const shipped = ['executor.toml', 'specs/github.yaml', 'schemas/tracker.json', 'specs/crm.yaml'];
    const secretRefs = ['arn:aws:secretsmanager:eu-west-1:123456789012:secret:billing-AbCdEf'];
    const asIs = withPolicies(example);
    assert.deepEqual(readSources(path.dirname(asIs.config), 'executor.toml'), {
      files: [...shipped, ...asIs.named],
      secretRefs,
    });
    const uncommented = example.replace(/^# (\[policy\]|cedar = ".*")$/gm, '$1');
    const cedar = withPolicies(uncommented);
    assert.deepEqual(cedar.named, ['examples/policies/github.cedar', 'examples/policies/sandbox-toolkit.cedar']);
    assert.deepEqual(readSources(path.dirname(cedar.config), 'executor.toml'), {
      files: [...shipped, ...cedar.named],
      secretRefs,
    });
  });

  const TRACKER = `
[[sources]]
namespace = "tracker"
kind = "graphql"
url = "https://tracker.example/graphql"
schema = "schemas/tracker.json"
`;

  test('a GraphQL schema file ships in the layer beside the sources file', () => {
    const config = sourcesDir(`${GITHUB}${TRACKER}`, {
      'specs/github.yaml': 'openapi: 3.0.0\n',
      'schemas/tracker.json': '{"data": {"__schema": {}}}',
      'schemas/unused.json': 'not shipped',
    });
    const { stack, rendered, outdir } = synth({ config, secretArns: [SECRET] });
    const asset = stack.configLayer!.node.findChild('Code') as Asset;
    const layer = path.join(outdir, asset.assetPath);
    assert.deepEqual(listFiles(layer), [
      'executor/executor.toml',
      'executor/schemas/tracker.json',
      'executor/specs/github.yaml',
    ]);
    // Where the functions resolve it: relative to EXECUTOR_CONFIG's directory.
    assert.equal(fs.readFileSync(path.join(layer, 'executor', 'schemas', 'tracker.json'), 'utf8'), '{"data": {"__schema": {}}}');
    assert.equal(rendered.Resources.McpFunction.Properties.Environment.Variables.EXECUTOR_CONFIG, '/opt/executor/executor.toml');
    // Introspected sources (no `schema`) ship nothing more.
    const introspected = sourcesDir(TRACKER.replace('schema = "schemas/tracker.json"\n', ''));
    assert.deepEqual(readSources(path.dirname(introspected), 'executor.toml').files, ['executor.toml']);
  });

  test('a GraphQL schema that is missing, outside the directory or a URL fails the synth', () => {
    assert.throws(
      () => synth({ config: sourcesDir(TRACKER) }),
      /config: source tracker: schema file .*schemas\/tracker.json does not exist/,
    );
    for (const schema of ['../tracker.json', '/etc/tracker.json']) {
      assert.throws(
        () => synth({ config: sourcesDir(TRACKER.replace('schemas/tracker.json', schema)) }),
        /config: source tracker: schema ".*" must be a path below .* to be deployed with the sources file$/,
      );
    }
    // `schema` is a file only (an introspection result), so a URL is looked for as one.
    assert.throws(
      () => synth({ config: sourcesDir(TRACKER.replace('schemas/tracker.json', 'https://tracker.example/schema.json')) }),
      /schema file .* does not exist/,
    );
  });

  test('every field of the sources file that names a file is shipped (the Rust config parser)', () => {
    // The parser (shared/catalog/src/config.rs and its submodules) makes each
    // such field a path relative to the sources file: `base_dir.join(...)`.
    const root = path.join(PROJECT_DIR, '..', '..', 'shared', 'catalog', 'src');
    const files = [path.join(root, 'config.rs')];
    if (fs.existsSync(path.join(root, 'config'))) {
      for (const name of fs.readdirSync(path.join(root, 'config'))) {
        if (name.endsWith('.rs') && name !== 'tests.rs') files.push(path.join(root, 'config', name));
      }
    }
    const lines = files.flatMap((file) => fs.readFileSync(file, 'utf8').split('\n'));
    // Each join names its field, or sits in a closure that does (`let read_cedar = |...| {`).
    const field = /(?:\b|_)(spec|schema|index|cedar)\b/;
    const named = lines.flatMap((line, i) =>
      line.includes('base_dir.join(') && !line.trim().startsWith('//')
        ? [(line.match(field) ?? lines[i - 1]?.match(field))?.[1] ?? `unknown: ${line.trim()}`]
        : [],
    );
    // `index` is top-level (shipped as the catalog index), `cedar` the Cedar
    // policies (`[policy] cedar` and each toolkit's); the others are the sources' FILE_FIELDS.
    assert.deepEqual(
      named.sort(),
      ['cedar', 'index', ...Object.keys(FILE_FIELDS)].sort(),
      'a field that names a file must be shipped: add it to FILE_FIELDS in lib/sources.ts',
    );
  });

  describe('Cedar policies', () => {
    const EXAMPLES = path.join(PROJECT_DIR, '..', '..', 'examples', 'policies');
    const WITH_CEDAR = `
[policy]
cedar = "policies/github.cedar"
${GITHUB}
[[toolkits]]
name = "sandbox"
tools = ["github.*"]
cedar = "policies/sandbox.cedar"
`;
    const examples = () => ({
      'specs/github.yaml': 'openapi: 3.0.0\n',
      'policies/github.cedar': fs.readFileSync(path.join(EXAMPLES, 'github.cedar'), 'utf8'),
      'policies/sandbox.cedar': fs.readFileSync(path.join(EXAMPLES, 'sandbox-toolkit.cedar'), 'utf8'),
      'policies/unused.cedar': 'not shipped',
    });
    const OK = '@id("ok")\npermit(principal, action, resource);\n';
    /** The sources dir of WITH_CEDAR with `policies/github.cedar` replaced by `text`. */
    const withPolicy = (text: string, file = 'policies/github.cedar') =>
      path.dirname(sourcesDir(WITH_CEDAR, { ...examples(), [file]: text }));

    test('`[policy] cedar` and each toolkit\'s `cedar` ship with the sources file', () => {
      const config = sourcesDir(WITH_CEDAR, examples());
      assert.deepEqual(readSources(path.dirname(config), 'executor.toml').files, [
        'executor.toml',
        'specs/github.yaml',
        'policies/github.cedar',
        'policies/sandbox.cedar',
      ]);
      const { stack, outdir } = synth({ config, secretArns: [SECRET] });
      const asset = stack.configLayer!.node.findChild('Code') as Asset;
      assert.deepEqual(listFiles(path.join(outdir, asset.assetPath)), [
        'executor/executor.toml',
        'executor/policies/github.cedar',
        'executor/policies/sandbox.cedar',
        'executor/specs/github.yaml',
      ]);
    });

    test('a policy the schema refuses fails the synth, naming the file, the line and the policy', () => {
      const dir = withPolicy(`${OK}@id("kinds")\npermit(principal, action, resource)\nwhen { resource.knd == "read" };\n`);
      assert.throws(
        () => synth({ config: path.join(dir, 'executor.toml'), secretArns: [SECRET] }),
        (e: Error) => {
          assert.equal(
            e.message,
            `config: ${path.join(dir, 'policies', 'github.cedar')}:5: policy \`kinds\`: ` +
              'attribute `knd` on entity type `Executor::Tool` not found (did you mean `kind`?)',
          );
          return true;
        },
      );
      // A toolkit's policies are checked too; without @id a policy is named `<file name>:<line>`.
      const toolkit = withPolicy(`${OK}\npermit(principal, action, resource)\nwhen { context.execution.writes == "3" };`, 'policies/sandbox.cedar');
      assert.throws(
        () => readSources(toolkit, 'executor.toml'),
        /^Error: config: .*policies\/sandbox\.cedar:5: policy `sandbox\.cedar:4`: the types Long and String are not compatible/,
      );
    });

    test('each mistake the functions would refuse at start fails the synth at its line', () => {
      // Each case follows a valid policy of two lines: its line 1 is the file's line 3.
      const cases: [string, number, RegExp][] = [
        ['permit(principal, action, resource)\n', 1, /: unexpected end of input/],
        ['permit(principal, action, resource)\nwhen { resource.kind == "read" ', 2, /: unexpected end of input/],
        ['permit(principal, action, resource)\nwhen { context.args has id && resource.knd == "x" };', 2, /policy `github.cedar:3`: attribute `knd`/],
        ['permit(principal, action == Executor::Action::"cal", resource);', 1, /unrecognized action `Executor::Action::"cal"`/],
        ['permit(principal, action, resource == Executor::Tol::"x");', 1, /unrecognized entity type `Executor::Tol`/],
        ['permit(principal, action, resource) when { context.args < 3 };', 1, /policy `github.cedar:3`: unexpected type/],
        ['@id("a")\npermit(principal, action, resource);\n@id("a")\nforbid(principal, action, resource);', 3, /: two policies have the id `a`; give each its own @id\("..."\)$/],
        ['@id("ok")\nforbid(principal, action, resource);', 1, /: two policies have the id `ok`/],
        ['permit(principal == ?principal, action, resource);', 1, /: policy templates \(`\?principal`, `\?resource`\) are not supported/],
        // Lines count in the file, whatever its comments hold.
        ['// é; "😀\n@id("x;y")\npermit(principal, action, resource)\nwhen { context.args has "é" && context.args["é"] == 1 &&\n  resource.knd == 1 };', 5, /policy `x;y`: attribute `knd`/],
      ];
      for (const [text, line, message] of cases) {
        const dir = withPolicy(`${OK}${text}`);
        const where = `config: ${path.join(dir, 'policies', 'github.cedar')}:${line + 2}: `;
        assert.throws(
          () => readSources(dir, 'executor.toml'),
          (e: Error) => e.message.startsWith(where) && message.test(e.message),
          `${text}\n wanted ${where}... ${message}`,
        );
      }
    });

    test('arguments stay open: `context.args` accesses are not errors', () => {
      for (const when of [
        'context.args has id && context.args.id == 7',
        'context.args.ref like "heads/*"',
        'context.args has body && context.args.body.state == "closed"',
        'context.args has body.state && context.args.body.state == "closed" && resource.kind == "write"',
        '!(context.args has owner && context.args["owner"] == "acme-sandbox")',
      ]) {
        assert.doesNotThrow(() => readSources(withPolicy(`${OK}permit(principal, action, resource) when { ${when} };\n`), 'executor.toml'), when);
      }
      // An empty file is a set of no policies.
      assert.doesNotThrow(() => readSources(withPolicy('// nothing yet\n'), 'executor.toml'));
    });

    test('a Cedar file that is missing, outside the directory or not a path fails the synth', () => {
      const files = examples();
      delete (files as Record<string, string>)['policies/sandbox.cedar'];
      assert.throws(
        () => synth({ config: sourcesDir(WITH_CEDAR, files), secretArns: [SECRET] }),
        /^Error: config: toolkit sandbox: cedar file .*policies\/sandbox\.cedar does not exist$/,
      );
      assert.throws(
        () => readSources(path.dirname(sourcesDir(WITH_CEDAR.replace('cedar = "policies/github.cedar"', 'cedar = "nowhere.cedar"'), examples())), 'executor.toml'),
        /^Error: config: \[policy\] cedar file .*nowhere\.cedar does not exist$/,
      );
      for (const outside of ['../policies.cedar', '/etc/policies.cedar']) {
        const config = sourcesDir(WITH_CEDAR.replace('policies/github.cedar', outside), examples());
        assert.throws(
          () => readSources(path.dirname(config), 'executor.toml'),
          /^Error: config: \[policy\] cedar ".*" must be a path below .* to be deployed with the sources file$/,
        );
      }
      const toolkitOutside = sourcesDir(WITH_CEDAR.replace('policies/sandbox.cedar', '../sandbox.cedar'), examples());
      assert.throws(() => readSources(path.dirname(toolkitOutside), 'executor.toml'), /config: toolkit sandbox: cedar "\.\.\/sandbox\.cedar" must be a path below/);
      assert.throws(
        () => readSources(path.dirname(sourcesDir(WITH_CEDAR.replace('"policies/github.cedar"', '7'), examples())), 'executor.toml'),
        /config: \[policy\] cedar: expected the path of a Cedar policy file/,
      );
    });
  });
});

function listFiles(dir: string, prefix = ''): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? listFiles(path.join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
    )
    .sort();
}

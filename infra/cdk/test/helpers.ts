// Shared by the tests: placeholder builds, a synthesized stack, and templates
// rendered with readable names instead of CloudFormation's hashed logical IDs.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { App, CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { IConstruct } from 'constructs';

import { BINARIES, ExecutorStack, ExecutorStackProps } from '../lib/executor-stack';

/** infra/cdk, whichever directory the tests run from. */
export const PROJECT_DIR = path.resolve(__dirname, '..', '..');

const temporary: string[] = [];
process.on('exit', () => temporary.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

/** A temporary directory, removed when the test process exits. */
export function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `executor-cdk-${prefix}-`));
  temporary.push(dir);
  return dir;
}

/** `<dir>/<binary>/bootstrap` for the three functions, with `content` as the file. */
export function placeholderAssets(content: Buffer | string = 'placeholder bootstrap\n'): string {
  const dir = tempDir('assets');
  for (const binary of Object.values(BINARIES)) {
    fs.mkdirSync(path.join(dir, binary));
    fs.writeFileSync(path.join(dir, binary, 'bootstrap'), content);
  }
  return dir;
}

/** The feature flags of cdk.json, so that tests synthesize what `cdk synth` does. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(fs.readFileSync(path.join(PROJECT_DIR, 'cdk.json'), 'utf8'));
  return cdkJson.context;
}

const sharedAssets = placeholderAssets();

export interface Synthesized {
  stack: ExecutorStack;
  template: Template;
  /** The cloud assembly directory (assets are staged under it). */
  outdir: string;
  /** The template as JSON with intrinsics rendered by `render`, main resources under readable names. */
  rendered: Record<string, any>;
}

export function synth(props: ExecutorStackProps = {}, stackName = 'ExecutorStack'): Synthesized {
  const app = new App({ context: cdkJsonContext(), outdir: tempDir('out') });
  const stack = new ExecutorStack(app, stackName, { assetDir: sharedAssets, ...props });
  const template = Template.fromStack(stack);
  const readable = names(stack);
  const rendered = render(template.toJSON(), readable);
  rendered.Resources = Object.fromEntries(
    Object.entries(rendered.Resources).map(([id, resource]) => [readable.get(id) ?? id, resource]),
  );
  return { stack, template, rendered, outdir: app.outdir };
}

/** Readable names for the stack's main resources: logical ID -> name. */
export function names(stack: ExecutorStack): Map<string, string> {
  const named: [string, IConstruct | undefined][] = [
    ['Table', stack.table],
    ['SessionAlarms', stack.scheduleGroup],
    ['SchedulerRole', stack.schedulerRole],
    ['McpFunction', stack.mcpFunction],
    ['ApprovalFunction', stack.approvalFunction],
    ['AlarmFunction', stack.alarmFunction],
    ['McpRole', stack.mcpFunction.role],
    ['ApprovalRole', stack.approvalFunction.role],
    ['AlarmRole', stack.alarmFunction.role],
    ['McpLogs', stack.node.findChild('McpFunctionLogs')],
    ['ApprovalLogs', stack.node.findChild('ApprovalFunctionLogs')],
    ['AlarmLogs', stack.node.findChild('AlarmFunctionLogs')],
    ['ApiAccessLogs', stack.node.findChild('ApiAccessLogs')],
    ['Api', stack.api],
    ['ConfigLayer', stack.configLayer],
    ['RequestStateKey', stack.requestStateKey],
    ['TokenKey', stack.tokenKey],
    ['Domain', stack.node.tryFindChild('Domain')],
    ['InitialKeySecret', stack.initialKey?.secret],
    ['InitialKeyFunction', stack.initialKey?.function],
    ['InitialKeyRole', stack.initialKey?.function.role],
    ['InitialKeyLogs', stack.initialKey?.node.findChild('Logs')],
    ['InitialKey', stack.initialKey?.resource],
    ['McpAlias', stack.aliases.mcp],
    ['ApprovalAlias', stack.aliases.approval],
    ['AlarmAlias', stack.aliases.alarm],
    ['ContinuationDeadLetterQueue', stack.continuationDeadLetterQueue],
    // Created with `kmsKey`; with `kmsKeyArn` an import, with no resource.
    ['EncryptionKey', stack.node.tryFindChild('EncryptionKey')],
    ['Dashboard', stack.observability?.dashboard],
    ...Object.entries(stack.observability?.alarms ?? {}).map(
      ([name, alarm]) => [`Alarm${name}`, alarm] as [string, IConstruct],
    ),
  ];
  const map = new Map<string, string>();
  for (const [name, construct] of named) {
    if (!construct) continue;
    const element = (construct instanceof CfnElement ? construct : construct.node.defaultChild) as CfnElement | undefined;
    if (element) map.set(stack.getLogicalId(element), name);
  }
  return map;
}

/**
 * CloudFormation intrinsics as strings: `{Ref: X}` -> `${X}`, `{Fn::GetAtt:
 * [X, Arn]}` -> `${X.Arn}`, `Fn::Join` joined, logical IDs replaced by `names`.
 */
export function render(value: any, names: Map<string, string> = new Map()): any {
  const id = (logicalId: string) => names.get(logicalId) ?? logicalId;
  if (Array.isArray(value)) return value.map((v) => render(v, names));
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value);
  if (keys.length === 1) {
    const [key] = keys;
    if (key === 'Ref') return `\${${id(value.Ref)}}`;
    if (key === 'Fn::GetAtt') return `\${${id(value[key][0])}.${value[key][1]}}`;
    if (key === 'Fn::Join') {
      const parts = render(value[key][1], names);
      if (parts.every((p: unknown) => typeof p === 'string')) return parts.join(value[key][0]);
    }
  }
  return Object.fromEntries(keys.map((k) => [k, render(value[k], names)]));
}

/** The rendered resources of one type, keyed by (readable) logical ID. */
export function resources(rendered: Record<string, any>, type: string): Record<string, any> {
  return Object.fromEntries(
    Object.entries(rendered.Resources as Record<string, any>).filter(([, r]) => r.Type === type),
  );
}

/** A policy statement with its lists sorted, for comparison. */
export function normalise(statement: any): any {
  const list = (v: unknown) => (v === undefined ? undefined : ([] as unknown[]).concat(v).sort());
  return JSON.parse(
    JSON.stringify({ ...statement, Action: list(statement.Action), Resource: list(statement.Resource) }),
  );
}

/** Every statement of the identity policies attached to the role named `role`. */
export function statementsOf(rendered: Record<string, any>, role: string): any[] {
  const policies = Object.values(resources(rendered, 'AWS::IAM::Policy')).filter((p) =>
    p.Properties.Roles.includes(`\${${role}}`),
  );
  const inline = rendered.Resources[role]?.Properties.Policies ?? [];
  return [...policies.map((p) => p.Properties.PolicyDocument), ...inline.map((p: any) => p.PolicyDocument)]
    .flatMap((doc) => doc.Statement)
    .map(normalise)
    .sort((a, b) => String(a.Sid).localeCompare(String(b.Sid)));
}

/** Every option set (a sources file too), for the checks that must hold whatever is configured. */
export function allOptions(): ExecutorStackProps {
  const dir = tempDir('config');
  fs.writeFileSync(path.join(dir, 'executor.toml'), '# sources\n');
  return { ...ALL_OPTIONS, config: path.join(dir, 'executor.toml') };
}

export const ALL_OPTIONS = {
  secretArns: [
    'arn:aws:secretsmanager:eu-west-1:123456789012:secret:github-token-AbCdEf',
    'arn:aws:secretsmanager:eu-west-1:123456789012:secret:billing/password-123456',
  ],
  domainName: 'mcp.example.com',
  certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab',
  oidcIssuer: 'https://idp.example',
  oidcAudience: 'executor',
  consoleClientId: 'executor-console',
  consoleSessionMs: 3_600_000,
  environment: {
    all: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318', AWS_LAMBDA_EXEC_WRAPPER: '/opt/otel-instrument' },
    mcp: { EXECUTOR_MAX_CONCURRENT_EXECUTIONS: '4' },
  },
  layerArns: { all: ['arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1'] },
  reservedConcurrency: { all: 20, alarm: 5 },
  tracing: true,
  vpcSubnetIds: ['subnet-0123456789abcdef0', 'subnet-0fedcba9876543210'],
  vpcSecurityGroupIds: ['sg-0123456789abcdef0'],
  throttleRateLimit: 50,
  throttleBurstLimit: 100,
  alarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:executor-alarms',
  initialKeyOwner: 'admin@example.com',
  memorySize: { all: 2048, alarm: 512 },
  versions: true,
  continuationDeadLetterQueue: true,
  functionAlarms: true,
  kmsKey: true,
  permissionsBoundaryArn: 'arn:aws:iam::123456789012:policy/executor-boundary',
  roleNamePrefix: 'app-',
  requestStateKeyGeneration: 2,
};

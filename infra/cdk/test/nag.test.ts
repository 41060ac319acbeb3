// cdk-nag's AwsSolutions rules: no finding left unacknowledged, and every
// acknowledgement is one of the reviewed ones below, with its reason.

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { IConstruct } from 'constructs';

import { allOptions, synth } from './helpers';

/** Acknowledged findings of the default stack: rule id -> how many constructs carry it. */
const REVIEWED: Record<string, number> = {
  // Schedules are named per session at run time; the group's `/*` is the narrowest resource.
  'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/ExecutorStack-sessions/executor-session-*]': 2,
  // The functions authenticate requests themselves (API keys cannot be checked by an authorizer).
  'AwsSolutions-APIG4': 10,
  // The request-state key is resolved into the MCP function's environment at deploy time: rotation would not reach
  // it; a new token key would make every stored OAuth connection unreadable.
  'AwsSolutions-SMG4': 2,
};

/** With every option set. */
const REVIEWED_ALL_OPTIONS: Record<string, number> = {
  ...REVIEWED,
  // X-Ray's and Lambda's network-interface actions have no resource-level permissions: one per function role.
  'AwsSolutions-IAM5[Resource::*]': 3,
  // The initial key's token must match its hash in the table: rotated by initialKeyGeneration.
  'AwsSolutions-SMG4': 3,
};

function acknowledged(scope: IConstruct): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const c of scope.node.findAll()) {
    for (const entry of c.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      // { "Annotation::<rule id>": reason, ... }
      for (const [key, reason] of Object.entries(entry.data as Record<string, string>)) {
        const id = key.replace(/^Annotation::/, '');
        found.set(id, [...(found.get(id) ?? []), reason]);
      }
    }
  }
  return found;
}

describe('cdk-nag AwsSolutions', () => {
  for (const [name, props, reviewed] of [
    ['defaults', {}, REVIEWED],
    ['every option set', allOptions(), REVIEWED_ALL_OPTIONS],
  ] as const) {
    test(`${name}: no unacknowledged finding, errors or warnings`, () => {
      const { stack } = synth(props);
      const report = new AwsSolutionsChecks().validateScope(stack);
      const findings = report.violations.map(
        (v) => `${v.severity} ${v.ruleName}: ${v.violatingResources.map((r) => r.resourceLogicalId).join(', ')}`,
      );
      assert.deepEqual(findings, []);
      assert.equal(report.success, true);

      const acks = acknowledged(stack);
      assert.deepEqual(Object.fromEntries([...acks].map(([id, reasons]) => [id, reasons.length])), reviewed);
      for (const [id, reasons] of acks) {
        for (const reason of reasons) assert.ok(reason.length > 40, `${id} needs a real reason`);
      }
    });
  }

  test('the checks run on this stack: a wildcard grant is reported', () => {
    const { stack } = synth();
    stack.mcpFunction.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:*'], resources: ['*'] }));
    const report = new AwsSolutionsChecks().validateScope(stack);
    assert.equal(report.success, false);
    assert.deepEqual(report.violations.map((v) => v.ruleName).sort(), [
      'AwsSolutions-IAM5[Action::dynamodb:*]',
      'AwsSolutions-IAM5[Resource::*]',
    ]);
  });
});

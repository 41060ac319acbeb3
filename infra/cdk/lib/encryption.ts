// The customer-managed key (`kmsKey`, `kmsKeyArn`): what a role needs to use
// it through the services that encrypt with it (docs/deploy.md, "Encryption").

import { Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { IConstruct } from 'constructs';

/** The key actions a role is granted: what DynamoDB, Secrets Manager and SQS ask of their callers. */
export const KEY_ACTIONS = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey'];

/**
 * Use of `key`, only through `services` (`kms:ViaService`, e.g. `dynamodb`):
 * the role cannot call KMS with it directly.
 */
export function useKey(scope: IConstruct, key: kms.IKey, services: string[]): iam.PolicyStatement {
  const region = Stack.of(scope).region;
  return new iam.PolicyStatement({
    sid: 'UseEncryptionKey',
    actions: KEY_ACTIONS,
    resources: [key.keyArn],
    conditions: { StringEquals: { 'kms:ViaService': services.map((s) => `${s}.${region}.amazonaws.com`) } },
  });
}

// The stack's first API key, so that a deployment needs no local build of the
// CLI: a custom resource mints it at deploy time (functions/initial-key), the
// table holds only its hash, and the token is in a Secrets Manager secret.

import * as path from 'node:path';
import { CustomResource, Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';

import { useKey } from './encryption';

/** infra/cdk/functions/initial-key, from the compiled dist/lib. */
export const HANDLER_DIR = path.resolve(__dirname, '..', '..', 'functions', 'initial-key');

export interface InitialKeyProps {
  table: dynamodb.Table;
  /** The key's owner (`executor keys create --owner`). */
  owner: string;
  /** A new value mints a new key and revokes the old one. */
  generation: number;
  removal: RemovalPolicy;
  logRetentionDays: number;
  /** The stack's customer-managed key (`kmsKey`, `kmsKeyArn`): the secret and the log group, and the table's. */
  encryptionKey?: kms.IKey;
  /** The role's name (`roleNamePrefix`). @default - generated */
  roleName?: string;
}

export class InitialKey extends Construct {
  /** Holds the token (the secret string, nothing else). */
  readonly secret: secretsmanager.Secret;
  readonly function: lambda.Function;
  readonly resource: CustomResource;

  constructor(scope: Construct, id: string, props: InitialKeyProps) {
    super(scope, id);
    // The initial value is a random placeholder, replaced with the token by
    // the custom resource before the deployment completes.
    this.secret = new secretsmanager.Secret(this, 'Token', {
      description: `Executor: the API key token of ${props.owner} (Authorization: Bearer ...)`,
      encryptionKey: props.encryptionKey,
      removalPolicy: props.removal,
    });
    Validations.of(this.secret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The token must match the hash stored in the table, so Secrets Manager cannot rotate it alone. It is ' +
        'rotated by changing initialKeyGeneration: the deployment mints a new key into this secret and revokes ' +
        'the old one.',
    });

    const logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetentionDays as logs.RetentionDays,
      encryptionKey: props.encryptionKey,
      removalPolicy: props.removal,
    });
    const role = new iam.Role(this, 'Role', {
      roleName: props.roleName,
      description: 'Executor: mints the initial API key (function role)',
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteOwnLogs',
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    // Only the `KEYS` partition: this function can mint and revoke keys, and touch nothing else.
    role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteKeys',
        actions: ['dynamodb:PutItem', 'dynamodb:DeleteItem'],
        resources: [props.table.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['KEYS'] } },
      }),
    );
    role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteToken',
        actions: ['secretsmanager:PutSecretValue'],
        resources: [this.secret.secretArn],
      }),
    );
    // The key writes to the table and the secret need, through those two services only.
    if (props.encryptionKey) role.addToPolicy(useKey(this, props.encryptionKey, ['dynamodb', 'secretsmanager']));
    this.function = new lambda.Function(this, 'Function', {
      description: 'Executor: mints the initial API key (CloudFormation custom resource)',
      runtime: lambda.Runtime.NODEJS_24_X,
      handler: 'index.handler',
      code: lambda.Code.fromAsset(HANDLER_DIR),
      memorySize: 256,
      timeout: Duration.seconds(30),
      role,
      logGroup,
    });
    this.resource = new CustomResource(this, 'Key', {
      serviceToken: this.function.functionArn,
      resourceType: 'Custom::ExecutorApiKey',
      properties: {
        TableName: props.table.tableName,
        SecretArn: this.secret.secretArn,
        Owner: props.owner,
        Generation: String(props.generation),
      },
    });
    // Its permissions must be in place before CloudFormation invokes it.
    this.resource.node.addDependency(role);
  }
}

// CloudFormation custom resource `Custom::ExecutorApiKey`: the stack's initial
// API key (docs/deploy.md, "The first key"). Create and Update mint a token
// exactly as `executor keys create` does, store only its SHA-256 in the table
// (the item shared/store's DynamoDB adapter writes) and the token in the
// secret; the physical ID is the hash, so a replacement (new owner or
// generation) makes CloudFormation delete the old one, which revokes it.
'use strict';

const crypto = require('node:crypto');
const https = require('node:https');

/** As cli/src/keys.rs: a prefix secret scanners know, then 256 random bits in hex. */
const TOKEN_PREFIX = 'exk_';

function newToken() {
  return TOKEN_PREFIX + crypto.randomBytes(32).toString('hex');
}

/** The table item of a key: partition `KEYS`, sort key `KEY#<hash>`, the record as JSON in `body`. */
function keyItem(token, owner, createdAtMs) {
  const hash = crypto.createHash('sha256').update(token, 'utf8').digest('hex');
  const body = JSON.stringify({ hash, owner, created_at: createdAtMs });
  return {
    hash,
    item: {
      pk: { S: 'KEYS' },
      sk: { S: `KEY#${hash}` },
      kind: { S: 'api_key' },
      owner: { S: owner },
      body: { B: Buffer.from(body, 'utf8') },
    },
  };
}

const HASH = /^[0-9a-f]{64}$/;

/**
 * What the event asks, done with `aws`: { putKey(table, item), deleteKey(table, hash),
 * putSecret(secretArn, token) }. Returns the physical resource ID.
 */
async function handle(event, aws, now = Date.now) {
  const { TableName: table, SecretArn: secretArn, Owner: owner } = event.ResourceProperties;
  if (event.RequestType === 'Delete') {
    // A create that failed before minting left no key behind.
    if (HASH.test(event.PhysicalResourceId)) await aws.deleteKey(table, event.PhysicalResourceId);
    return event.PhysicalResourceId;
  }
  const token = newToken();
  const { hash, item } = keyItem(token, owner, now());
  await aws.putKey(table, item);
  try {
    await aws.putSecret(secretArn, token);
  } catch (error) {
    // Nobody could learn this token: take the key back before failing.
    await aws.deleteKey(table, hash).catch(() => undefined);
    throw error;
  }
  return hash;
}

/** The SDK calls, with the clients the Node.js runtime ships. */
function sdk() {
  const ddb = require('@aws-sdk/client-dynamodb');
  const sm = require('@aws-sdk/client-secrets-manager');
  const dynamodb = new ddb.DynamoDBClient({});
  const secrets = new sm.SecretsManagerClient({});
  return {
    putKey: (table, item) =>
      dynamodb.send(
        new ddb.PutItemCommand({ TableName: table, Item: item, ConditionExpression: 'attribute_not_exists(sk)' }),
      ),
    deleteKey: (table, hash) =>
      dynamodb.send(new ddb.DeleteItemCommand({ TableName: table, Key: { pk: { S: 'KEYS' }, sk: { S: `KEY#${hash}` } } })),
    putSecret: (secretArn, token) =>
      secrets.send(new sm.PutSecretValueCommand({ SecretId: secretArn, SecretString: token })),
  };
}

/** The response CloudFormation waits for, PUT to the pre-signed URL it gave. */
function respond(event, status, physicalId, reason) {
  const body = JSON.stringify({
    Status: status,
    Reason: reason,
    PhysicalResourceId: physicalId,
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
  });
  return new Promise((resolve, reject) => {
    const request = https.request(
      event.ResponseURL,
      { method: 'PUT', headers: { 'content-type': '', 'content-length': Buffer.byteLength(body) } },
      (response) => {
        response.resume();
        response.on('end', resolve);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

exports.handler = async (event, context) => {
  try {
    const physicalId = await handle(event, sdk());
    await respond(event, 'SUCCESS', physicalId, 'OK');
  } catch (error) {
    console.error('initial key:', error);
    // Keep the old physical ID on a failed update, so CloudFormation deletes nothing.
    const physicalId = event.PhysicalResourceId || context.logStreamName;
    await respond(event, 'FAILED', physicalId, `${error.name}: ${error.message} (log stream ${context.logStreamName})`);
  }
};

exports.handle = handle;
exports.keyItem = keyItem;
exports.newToken = newToken;

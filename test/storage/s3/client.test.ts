import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createS3Client,
  credentialSourceFrom,
  describeS3Access,
  resolveCredentialSource,
} from '../../../src/storage/s3/client.js';
import { FAKE_KEY_ID, FAKE_SECRET, FAKE_SESSION } from '../../support/s3-servers.js';

const CUSTOM = 'http://127.0.0.1:9000';

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('createS3Client', () => {
  it('with a custom endpoint: path-style on, checksums WHEN_REQUIRED, the endpoint applied once', async () => {
    const { client, config } = createS3Client({ AWS_ENDPOINT_URL_S3: CUSTOM, AWS_REGION: 'eu-west-3' });
    expect(config).toMatchObject({
      endpoint: CUSTOM,
      endpointSource: 'AWS_ENDPOINT_URL_S3',
      forcePathStyle: true,
      checksums: 'WHEN_REQUIRED',
      region: 'eu-west-3',
      regionSource: 'AWS_REGION',
      maxAttempts: 4,
    });
    const endpoint = await client.config.endpoint?.();
    expect(`${endpoint?.protocol}//${endpoint?.hostname}:${endpoint?.port}`).toBe(CUSTOM);
    expect(await client.config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');
    expect(await client.config.responseChecksumValidation()).toBe('WHEN_REQUIRED');
    expect(client.config.forcePathStyle).toBe(true);
    expect(client.config.followRegionRedirects).toBe(true);
    expect(await client.config.maxAttempts()).toBe(4);
    client.destroy();
  });

  it('AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL; AWS_IGNORE_CONFIGURED_ENDPOINT_URLS drops both', () => {
    const both = createS3Client({ AWS_ENDPOINT_URL: 'http://other:1', AWS_ENDPOINT_URL_S3: CUSTOM });
    expect(both.config.endpoint).toBe(CUSTOM);
    const generic = createS3Client({ AWS_ENDPOINT_URL: 'http://other:1' });
    expect(generic.config).toMatchObject({ endpoint: 'http://other:1', endpointSource: 'AWS_ENDPOINT_URL' });
    const ignored = createS3Client({
      AWS_ENDPOINT_URL_S3: CUSTOM,
      AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true',
    });
    expect(ignored.config).toMatchObject({
      endpoint: null,
      forcePathStyle: false,
      checksums: 'WHEN_SUPPORTED',
    });
    for (const c of [both, generic, ignored]) c.client.destroy();
  });

  it('on AWS: virtual-hosted, default checksums, region from AWS_DEFAULT_REGION or the default', async () => {
    const aws = createS3Client({ AWS_DEFAULT_REGION: 'ap-south-1' });
    expect(aws.config).toMatchObject({ endpoint: null, forcePathStyle: false, checksums: 'WHEN_SUPPORTED' });
    expect(aws.config).toMatchObject({ region: 'ap-south-1', regionSource: 'AWS_DEFAULT_REGION' });
    expect(await aws.client.config.region()).toBe('ap-south-1');
    // No region anywhere (shared config files pointed at nothing): the default, redirects followed.
    vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent/kb-config');
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent/kb-credentials');
    const none = createS3Client({}, { defaultRegion: 'eu-central-1' });
    expect(none.config).toMatchObject({
      region: 'eu-central-1',
      regionSource: 'shared config, else default',
    });
    expect(await none.client.config.region()).toBe('eu-central-1');
    aws.client.destroy();
    none.client.destroy();
  });

  it('without a region in the environment, the shared config profile of AWS_PROFILE names it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'kb-awsconfig-'));
    const file = path.join(dir, 'config');
    await writeFile(file, '[default]\nregion = sa-east-1\n[profile ci]\nregion = eu-north-1\n');
    vi.stubEnv('AWS_CONFIG_FILE', file);
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', path.join(dir, 'none'));
    const ci = createS3Client({ AWS_PROFILE: 'ci' });
    expect(await ci.client.config.region()).toBe('eu-north-1');
    const plain = createS3Client({});
    expect(await plain.client.config.region()).toBe('sa-east-1');
    ci.client.destroy();
    plain.client.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  it('KITCHEN_S3_FORCE_PATH_STYLE overrides the default and is validated', () => {
    expect(createS3Client({ KITCHEN_S3_FORCE_PATH_STYLE: 'yes' }).config.forcePathStyle).toBe(true);
    expect(
      createS3Client({ AWS_ENDPOINT_URL_S3: CUSTOM, KITCHEN_S3_FORCE_PATH_STYLE: '0' }).config.forcePathStyle,
    ).toBe(false);
    expect(() => createS3Client({ KITCHEN_S3_FORCE_PATH_STYLE: 'maybe' })).toThrow(
      'KITCHEN_S3_FORCE_PATH_STYLE must be 1/true/yes/on or 0/false/no/off, got "maybe"',
    );
  });

  it('refuses a malformed endpoint, an endpoint with a password, bad maxAttempts', () => {
    expect(() => createS3Client({ AWS_ENDPOINT_URL_S3: 'localhost:9000x' })).toThrow(
      /AWS_ENDPOINT_URL_S3 must be/,
    );
    expect(() => createS3Client({ AWS_ENDPOINT_URL_S3: 'ftp://h/' })).toThrow(/http\(s\) URL/);
    let message = '';
    try {
      createS3Client({ AWS_ENDPOINT_URL: `http://u:${FAKE_SECRET}@h:9000` });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/must not hold a user name or password/);
    expect(message).not.toContain(FAKE_SECRET);
    expect(() => createS3Client({}, { maxAttempts: 0 })).toThrow(
      /maxAttempts must be an integer from 1 to 20, got 0/,
    );
  });
});

describe('credential source', () => {
  it('names the link of the chain and never a key', () => {
    const env = {
      AWS_ACCESS_KEY_ID: FAKE_KEY_ID,
      AWS_SECRET_ACCESS_KEY: FAKE_SECRET,
      AWS_SESSION_TOKEN: FAKE_SESSION,
    };
    expect(credentialSourceFrom(env)).toBe('environment (AWS_ACCESS_KEY_ID with AWS_SESSION_TOKEN)');
    expect(credentialSourceFrom({ AWS_PROFILE: 'ci' })).toBe('shared config profile "ci" (AWS_PROFILE)');
    expect(
      credentialSourceFrom({
        AWS_WEB_IDENTITY_TOKEN_FILE: '/var/run/token',
        AWS_ROLE_ARN: 'arn:aws:iam::1:role/r',
      }),
    ).toBe('web identity (AWS_WEB_IDENTITY_TOKEN_FILE, role arn:aws:iam::1:role/r)');
    expect(credentialSourceFrom({ AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/v2/x' })).toMatch(/^container/);
    expect(credentialSourceFrom({})).toMatch(/^default chain/);

    const { client, config } = createS3Client({ ...env, AWS_ENDPOINT_URL_S3: CUSTOM });
    const line = describeS3Access(config, 'kitchen');
    expect(line).toContain('bucket "kitchen"');
    expect(line).toContain(`endpoint ${CUSTOM} (AWS_ENDPOINT_URL_S3)`);
    expect(line).toContain('credentials from environment (AWS_ACCESS_KEY_ID with AWS_SESSION_TOKEN)');
    for (const secret of [FAKE_KEY_ID, FAKE_SECRET, FAKE_SESSION]) {
      expect(line).not.toContain(secret);
      expect(JSON.stringify(config)).not.toContain(secret);
    }
    client.destroy();
  });

  it('resolves the source the SDK actually used, without the key', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    const access = createS3Client({ AWS_ENDPOINT_URL_S3: CUSTOM, AWS_ACCESS_KEY_ID: FAKE_KEY_ID });
    const source = await resolveCredentialSource(access);
    expect(source).toBe('environment variables');
    access.client.destroy();
  });
});

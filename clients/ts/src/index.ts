// @mqgate/client: a thin typed client of the mqgate HTTP API.
//
// The types (./schema.ts) are generated from the repository's
// docs/openapi.json by openapi-typescript (`npm run generate`; CI fails when
// the committed file is stale); requests go through openapi-fetch, so every
// path, parameter, body and answer is checked by the TypeScript compiler.
// This file adds only what the generated types cannot say: where the API is
// (the /v1 prefix), credentials, problem+json errors as exceptions, raw
// (non-JSON) sends and message bodies.

import createClient, { type Client, type ClientOptions, type Middleware } from "openapi-fetch";

import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

/** The API's named schemas: `Schemas["Message"]`, `Schemas["Topic"]`, … */
export type Schemas = components["schemas"];
/** An RFC 9457 problem: every error answer of mqgate. */
export type Problem = Schemas["Problem"];
/** A message as a lookup or a queue read returns it. */
export type Message = Schemas["Message"];
/** A message as a pull returns it: a Message with its lease's receipt and end (leaseUntil). */
export type PulledMessage = Schemas["PulledMessage"];

/** The typed client: `client.POST("/topics/{topic}/messages", …)` and so on for every operation of the spec. */
export type MqgateClient = Client<paths>;

/**
 * Credentials of a server run with an ACL file: HTTP Basic with an account's
 * access key and secret key, or a bearer JWT (a string, or a function asked
 * before every request, for tokens that expire).
 */
export type MqgateAuth =
  | { basic: { accessKey: string; secretKey: string } }
  | { bearer: string | (() => string | Promise<string>) };

/** Options of {@link createMqgateClient}; the rest are openapi-fetch's (fetch, headers, …). */
export interface MqgateClientOptions extends Omit<ClientOptions, "baseUrl"> {
  /**
   * The server's address, e.g. `http://127.0.0.1:8080` (the spec's paths
   * are below `/v1`, which is appended unless baseUrl already ends with it).
   */
  baseUrl: string;
  /** Credentials sent with every request. */
  auth?: MqgateAuth;
}

/** The API version prefix of every path of the spec (its `servers` entry). */
export const apiPrefix = "/v1";

/**
 * createMqgateClient returns the typed openapi-fetch client of the mqgate
 * server at baseUrl. Calls return `{ data, error, response }`; wrap them in
 * {@link unwrap} to get the data or a thrown {@link ProblemError}.
 */
export function createMqgateClient(options: MqgateClientOptions): MqgateClient {
  const { baseUrl, auth, headers, ...rest } = options;
  let base = baseUrl.replace(/\/+$/, "");
  if (!base.endsWith(apiPrefix)) base += apiPrefix;
  const client = createClient<paths>({ ...rest, baseUrl: base, headers });
  if (auth) client.use(authMiddleware(auth));
  return client;
}

/** authMiddleware sets the Authorization header of every request. */
function authMiddleware(auth: MqgateAuth): Middleware {
  if ("basic" in auth) {
    const value = "Basic " + base64(new TextEncoder().encode(`${auth.basic.accessKey}:${auth.basic.secretKey}`));
    return {
      onRequest({ request }) {
        request.headers.set("Authorization", value);
        return request;
      },
    };
  }
  const token = auth.bearer;
  return {
    async onRequest({ request }) {
      request.headers.set("Authorization", "Bearer " + (typeof token === "function" ? await token() : token));
      return request;
    },
  };
}

/** The code of a {@link ProblemError} made from an error answer that was not problem+json (a proxy's error page, say). */
export const notAProblem = "not-a-problem";

/**
 * ProblemError is an error answer of the API as an exception: `code` is the
 * problem's stable machine-readable code (`topic-not-found`,
 * `invalid-argument`, …, listed per status in the spec), `status` the HTTP
 * status, `detail` the explanation of this occurrence. `problem` is the
 * whole problem (field, limit, requestId, …).
 */
export class ProblemError extends Error {
  readonly code: string;
  readonly status: number;
  readonly detail: string | undefined;
  readonly problem: Problem;
  /** The HTTP response, when the error came from one. */
  readonly response: Response | undefined;

  constructor(problem: Problem, response?: Response) {
    super(`${problem.status} ${problem.code}: ${problem.detail ?? problem.title}`);
    this.name = "ProblemError";
    this.code = problem.code;
    this.status = problem.status;
    this.detail = problem.detail;
    this.problem = problem;
    this.response = response;
  }
}

/** isProblem reports whether v has the members every mqgate problem has. */
export function isProblem(v: unknown): v is Problem {
  if (typeof v !== "object" || v === null) return false;
  const p = v as Record<string, unknown>;
  return typeof p.code === "string" && typeof p.status === "number" && typeof p.type === "string" && typeof p.title === "string";
}

/** isProblemError reports whether e is a {@link ProblemError}, with the given code if one is given. */
export function isProblemError(e: unknown, code?: string): e is ProblemError {
  return e instanceof ProblemError && (code === undefined || e.code === code);
}

/** The result of an openapi-fetch call: `{ data, response }` or `{ error, response }`. */
export type Result = { data?: unknown; error?: unknown; response: Response };

/** The data of a successful {@link Result}. */
export type ResultData<R> = R extends { data: infer D; error?: never } ? D : never;

/**
 * unwrap returns the data of a successful call (undefined for a 204) and
 * throws a {@link ProblemError} for an error answer:
 * `const topic = unwrap(await client.GET("/topics/{topic}", { params: { path: { topic: "orders" } } }))`.
 */
export function unwrap<R extends Result>(result: R): ResultData<R> {
  if (result.error === undefined && result.response.ok) return result.data as ResultData<R>;
  throw problemError(result.error, result.response);
}

/** problemError turns an error answer's parsed body into a {@link ProblemError}. */
export function problemError(body: unknown, response: Response): ProblemError {
  if (isProblem(body)) return new ProblemError(body, response);
  const text = typeof body === "string" ? body : body === undefined ? "" : JSON.stringify(body);
  return new ProblemError(
    {
      type: "about:blank",
      code: notAProblem,
      status: response.status,
      title: response.statusText || "HTTP error",
      detail: `the ${response.status} answer is not a problem: ${text.slice(0, 200)}`,
    },
    response,
  );
}

/** Options of a raw send: the X-Mqgate-* headers and Idempotency-Key. */
export interface RawSendOptions {
  /** Content-Type of the body; default application/octet-stream. */
  contentType?: string;
  tag?: string;
  keys?: string[];
  /** Properties; header names are case-insensitive, so the server stores the names lower-cased. */
  properties?: Record<string, string>;
  shardingKey?: string;
  delayLevel?: number;
  delayMs?: number;
  /** RFC 3339 delivery time. */
  deliverAt?: string;
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/**
 * sendRaw sends body as one raw message (any Content-Type but JSON and the
 * binary batch: the body is stored as it is) and returns the send's result.
 * The spec types a raw body as a string; this also takes bytes.
 */
export async function sendRaw(
  client: MqgateClient,
  topic: string,
  body: string | Uint8Array | ArrayBuffer | Blob,
  options: RawSendOptions = {},
): Promise<Schemas["SendResult"]> {
  const headers: Record<string, string> = { "Content-Type": options.contentType ?? "application/octet-stream" };
  for (const [name, value] of Object.entries(options.properties ?? {})) headers["X-Mqgate-Property-" + name] = value;
  const header: NonNullable<paths["/topics/{topic}/messages"]["post"]["parameters"]["header"]> = {};
  if (options.tag !== undefined) header["X-Mqgate-Tag"] = options.tag;
  if (options.keys !== undefined) header["X-Mqgate-Keys"] = options.keys.join(",");
  if (options.shardingKey !== undefined) header["X-Mqgate-Sharding-Key"] = options.shardingKey;
  if (options.delayLevel !== undefined) header["X-Mqgate-Delay-Level"] = options.delayLevel;
  if (options.delayMs !== undefined) header["X-Mqgate-Delay-Ms"] = options.delayMs;
  if (options.deliverAt !== undefined) header["X-Mqgate-Deliver-At"] = options.deliverAt;
  if (options.idempotencyKey !== undefined) header["Idempotency-Key"] = options.idempotencyKey;
  const res = unwrap(
    await client.POST("/topics/{topic}/messages", {
      params: { path: { topic }, header },
      headers,
      // The body goes as it is: openapi-fetch would JSON-encode it.
      body: body as string,
      bodySerializer: (b) => b,
      signal: options.signal,
    }),
  );
  const result = res.results[0];
  if (res.results.length !== 1 || result === undefined) {
    throw new Error(`a raw send returned ${res.results.length} results`);
  }
  return result;
}

/** messageBytes decodes a message body (Message, DeadLetter, Timer) by its bodyEncoding. */
export function messageBytes(m: { body?: string; bodyEncoding?: string }): Uint8Array {
  const body = m.body ?? "";
  if (m.bodyEncoding === "base64") return unbase64(body);
  return new TextEncoder().encode(body);
}

/** messageText is the body as text (UTF-8 decoded when it came as base64). */
export function messageText(m: { body?: string; bodyEncoding?: string }): string {
  if (m.bodyEncoding === "base64") return new TextDecoder().decode(unbase64(m.body ?? ""));
  return m.body ?? "";
}

/** base64 encodes bytes with the standard alphabet, padded (btoa exists in browsers and Node 16+). */
export function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** unbase64 decodes standard, padded base64. */
export function unbase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the stand-in received, its body parsed as JSON exactly as the SDK sent it. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: unknown;
}

/** A local HTTP server on 127.0.0.1 that answers a provider's API with scripted JSON replies and keeps every request. */
export interface ProviderStandIn {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly requests: readonly RecordedRequest[];
  /** The JSON body of the `index`-th request, typed as the test reads it; throws when there was no such request. */
  body<Body>(index: number): Body;
  close(): Promise<void>;
}

/**
 * Starts a stand-in of a provider's HTTP API: the n-th request is answered with `replies[n]` as JSON (status 200),
 * or a 500 naming the missing reply, so a loop that asks once too often fails loudly.
 */
export async function startProviderStandIn(replies: readonly unknown[]): Promise<ProviderStandIn> {
  const requests: RecordedRequest[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      requests.push({
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: text.length > 0 ? JSON.parse(text) : undefined,
      });
      const reply = replies[requests.length - 1];
      response.statusCode = reply === undefined ? 500 : 200;
      response.setHeader('content-type', 'application/json');
      response.end(
        JSON.stringify(reply ?? { error: { message: `stand-in has no reply for request ${requests.length}` } }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    body<Body>(index: number): Body {
      const request = requests[index];
      if (request === undefined) throw new Error(`the stand-in received ${requests.length} requests, not ${index + 1}`);
      return request.body as Body;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

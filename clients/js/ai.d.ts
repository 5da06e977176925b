// Types of @bubble/client/ai (src/ai.js). The `ai` package (v6) is needed
// for its types only.

import type { ChatTransport, UIMessage, UIMessageChunk } from 'ai';

import type { BubbleEvent, Connection, Thread } from './index.js';

/** `data-bubble-role`: the transient chunk that makes a run's message a `user` (or `system`) message. */
export const ROLE_CHUNK: 'data-bubble-role';

/** The chunks that rebuild `message` (text, reasoning, files, sources, data, steps) in the thread's fold. */
export function messageChunks(message: UIMessage): UIMessageChunk[];

/** Appends `message` as one run (`run_started`, its chunks, `run_finished`); resolves with the stored `run_finished`. */
export function appendMessage(thread: Thread, message: UIMessage, options?: { runId?: string }): Promise<BubbleEvent>;

export interface StreamToThreadOptions {
  /** The run's id (default: random). */
  runId?: string;
  /** The message id given to a first `start` chunk without one (default: the run id). */
  messageId?: string;
  /** Stops reading the stream; the run finishes `aborted`. */
  signal?: AbortSignal;
  /** Longest merged delta, in UTF-16 units (default 8192). */
  maxDeltaChars?: number;
}

export interface StreamedRun {
  runId: string;
  messageId: string;
  status: 'completed' | 'failed' | 'aborted';
  /** What the stream threw, when `failed`. */
  error?: unknown;
}

/**
 * Appends a UIMessageChunk stream to `thread` as one run between
 * `run_started` and `run_finished`; rejects only when the thread refuses
 * an append.
 */
export function streamToThread(
  thread: Thread,
  stream: ReadableStream<UIMessageChunk> | AsyncIterable<UIMessageChunk>,
  options?: StreamToThreadOptions,
): Promise<StreamedRun>;

export interface BubbleChatTransportOptions {
  /** The connection chats stream over (a thread is subscribed while its response streams). */
  connection: Connection;
  /** The thread of a chat (default: the chat id is the thread id). */
  threadId?: (chatId: string) => string;
}

/** An AI SDK v6 `ChatTransport` whose chats are Bubble threads. */
export class BubbleChatTransport<UI_MESSAGE extends UIMessage = UIMessage> implements ChatTransport<UI_MESSAGE> {
  constructor(options: BubbleChatTransportOptions);
  readonly resumeStreamIsReplay: true;
  sendMessages: ChatTransport<UI_MESSAGE>['sendMessages'];
  reconnectToStream: ChatTransport<UI_MESSAGE>['reconnectToStream'];
}

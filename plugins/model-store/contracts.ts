/**
 * The model store contract: what the inference engine and the APIs may ask of the plugin that
 * owns the models on disk (`plugins/model-store`). The engine never reads manifests itself.
 *
 * @module
 */

/** What a model can do, in Ollama's vocabulary (`/api/show` → `capabilities`). */
export type ModelCapability =
  'completion' | 'chat' | 'embedding' | 'rerank' | 'transcription' | 'speech' | 'tools' | 'insert' | 'vision' | 'audio' | 'thinking';

/**
 * The name of a model's weights format (`gguf`, `onnx`, or whatever a backend declares); it decides
 * which inference backend runs the model. Backends own the formats: see `FormatHandler` in
 * `lia/engine`.
 */
export type ModelFormat = string;

/** The `details` object of `/api/tags` and `/api/show`. */
export interface ModelDetails {
  parent_model: string;
  format: ModelFormat;
  family: string;
  families: string[] | null;
  parameter_size: string;
  quantization_level: string;
}

/** One chat message stored in a model (Modelfile `MESSAGE`). */
export interface StoredMessage {
  role: string;
  content: string;
}

/** A model resolved from the store, ready for a backend to load. */
export interface ResolvedModel {
  /** Canonical short name as clients show it, e.g. `stories:latest` or `host/ns/model:tag`. */
  name: string;
  /** Hex SHA-256 of the manifest (no prefix); changes whenever the model changes. */
  digest: string;
  format: ModelFormat;
  /**
   * Where the weights are, as the format's handler asks (`FormatHandler.layout`): for `file` the
   * one weights blob (GGUF); for `folder` a directory with every weights file under its own
   * relative name (the ONNX layout: config.json, tokenizer.json, onnx/model*.onnx). For a format
   * no enabled backend serves, the first weights blob.
   */
  modelPath: string;
  /**
   * The vision projector blob (a layer of media type `application/vnd.ollama.image.projector`,
   * a CLIP-style GGUF that llama.cpp loads with `--mmproj`), when the model has one.
   */
  projectorPath?: string;
  /**
   * LoRA adapters (layers of media type `application/vnd.ollama.image.adapter`, GGUF LoRA files
   * for these weights), in manifest order: a request's `lora` ids index this list. Absent: none.
   */
  adapters?: readonly ModelAdapter[];
  /** Bytes of all weight layers (the figure the scheduler budgets memory with). */
  sizeBytes: number;
  /** Template layer (Go template text as Ollama stores it), if the model has one. */
  template?: string;
  /** System prompt layer, if any. */
  system?: string;
  /** Default options from the params layer (Ollama option names, e.g. `temperature`, `stop`). */
  parameters: Record<string, unknown>;
  /** Pre-seeded conversation (Modelfile `MESSAGE`). */
  messages: StoredMessage[];
  capabilities: ModelCapability[];
  details: ModelDetails;
  /** Set for a model served by an upstream engine rather than from local files (see {@link ModelSource}). */
  remote?: RemoteOrigin;
}

/** One LoRA adapter of a model ({@link ResolvedModel.adapters}). */
export interface ModelAdapter {
  /** The adapter's blob file. */
  path: string;
  /** `sha256:<hex>` of its bytes. */
  digest: string;
  /** The file name it was created from, when the layer keeps one. */
  name?: string;
}

/** A callback the store runs before it deletes a model, so a runner can unload it first. */
export type BeforeDeleteHook = (model: { name: string; digest: string }) => Promise<void>;

/** A model as a listing shows it, read from its manifest alone (no weights are opened). */
export interface CatalogEntry {
  /** Canonical short name, as {@link ResolvedModel.name}. */
  name: string;
  /** The namespace of the name (`library` for the default one): OpenAI's `owned_by`. */
  namespace: string;
  /** Hex SHA-256 of the manifest. */
  digest: string;
  /** Bytes of the config blob and every layer. */
  sizeBytes: number;
  /** When the model was created or last changed. */
  modifiedAt: Date;
  /** Set for a remote model (see {@link ModelSource}). */
  remote?: RemoteOrigin;
  /**
   * Set for a model that carries LoRA adapters: the model its weights came from (`parent_model`),
   * `''` when it was created from files. OpenAI-compatible servers list it as `parent` (vLLM).
   */
  parent?: string;
}

/**
 * Where a remote model is served, as `/api/tags` and `/api/show` report it (`remote_host`,
 * `remote_model`, the fields Ollama uses for its cloud models).
 */
export interface RemoteOrigin {
  /** The upstream(s) serving it, e.g. `https://gpu1:8000` (several replicas: joined by `, `). */
  host: string;
  /** The model's name on the upstream. */
  model: string;
}

/**
 * A model that has no local files: an upstream engine serves it. A {@link ModelSource} lists it and
 * the backend that runs its `format` forwards the requests.
 */
export interface RemoteModel {
  /** The name LIA shows and clients ask for (normalised by the store, e.g. `big` → `big:latest`). */
  name: string;
  /** The format whose backend serves it (the upstream plugin's own). */
  format: ModelFormat;
  /** Hex SHA-256 that changes when what serves the model changes (its upstreams). */
  digest: string;
  capabilities: ModelCapability[];
  details: ModelDetails;
  remote: RemoteOrigin;
  modifiedAt: Date;
  /** Default options (Ollama names), as a stored model's params layer. Defaults to none. */
  parameters?: Record<string, unknown>;
}

/**
 * Contributes remote models to the catalog (`hooks.modelSources`): the model store lists them
 * beside its own in `/api/tags`, `/v1/models` and `/api/show`, resolves their names for the
 * engine, and refuses to pull, push, copy or delete them (a 400 saying what they are). A local
 * model is never shadowed: a remote model whose name a local one holds is left out, and the
 * source should warn the operator (see docs/scale-out.md). `models()` is called on every lookup:
 * keep it a cheap, synchronous snapshot.
 */
export interface ModelSource {
  readonly name: string;
  models(): readonly RemoteModel[];
}

export interface ModelStore {
  /** Every model in the store, newest first, from the manifests alone. */
  catalog(): Promise<CatalogEntry[]>;
  /** One model's catalog entry; the same 404 and 400 as {@link ModelStore.resolve}. */
  entry(name: string): Promise<CatalogEntry>;
  /**
   * Resolves a client-supplied name (`model`, `model:tag`, `ns/model`, `host/ns/model:tag`).
   * Throws `Errors.modelNotFound` (404) for an unknown model and `Errors.badRequest` (400) for
   * an invalid name.
   */
  resolve(name: string): Promise<ResolvedModel>;
  /** Every model in the store, newest first. */
  list(): Promise<ResolvedModel[]>;
  /** Registers a hook that runs before a model is deleted (the engine unloads it there). */
  onBeforeDelete(hook: BeforeDeleteHook): void;
}

/**
 * A loaded ONNX VITS speech synthesiser (`VitsModel`: MMS-TTS and kin) behind the
 * {@link LoadedModel} contract, run with transformers.js: `synthesize` takes one sentence (the
 * engine splits the input), which the folder's `VitsTokenizer` makes into token ids (its
 * normaliser lower-cases, drops what the vocabulary lacks and intersperses the blank, as
 * MMS-TTS was trained), and `VitsModel` makes into a waveform at `config.json`'s
 * `sampling_rate`. A graph with a `speaker_id` input is handed the voice's speaker id (the
 * voices of `config.json`, head.ts); a graph without one speaks every voice with its one
 * speaker. VITS takes no instructions: they are ignored. `speaking_rate` and the noise scales
 * are baked into the exported graph; the engine changes the speed while encoding. Passes run one
 * at a time; `unload` waits for the one in flight.
 *
 * @module
 */
import type { FastifyBaseLogger } from 'fastify';
import { Errors } from 'lia/plugin';
import type { LoadedModel, SpeechOutput, SynthesizeParams, SynthesizeResult } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import type { OnnxLayout, SpeechShape } from './layout.js';
import type { EncoderSettings } from './model.js';
import { describeError, FOLDER_ONLY, loadFolder, networkOptions, OnnxModel } from './onnx-model.js';
import { transformers, type Transformers } from './runtime.js';
import type { Tokenizer } from './tokens.js';

type Network = Awaited<ReturnType<Transformers['VitsModel']['from_pretrained']>>;
type Tensor = InstanceType<Transformers['Tensor']>;

/** The graph input that picks the speaker of a multi-speaker model (HF's `VitsModel.forward` argument). */
const SPEAKER_INPUT = 'speaker_id';

/** Loads the tokenizer and network of `model` from its folder. */
export async function loadVits(model: ResolvedModel, layout: OnnxLayout, settings: EncoderSettings, log?: FastifyBaseLogger): Promise<LoadedModel> {
  const shape = layout.speech;
  if (!shape) throw Errors.engineFailed(`model "${model.name}" cannot be loaded: its config.json does not describe a speech model`);
  const t = await transformers();
  return loadFolder(model, layout, async () => {
    const tokenizer = await t.AutoTokenizer.from_pretrained(layout.dir, FOLDER_ONLY);
    const network = await t.VitsModel.from_pretrained(layout.dir, networkOptions(layout, settings));
    const inputs = (network as unknown as { sessions: Record<string, { inputNames: string[] }> }).sessions['model']?.inputNames ?? [];
    const speakerInput = inputs.includes(SPEAKER_INPUT);
    if (!speakerInput && shape.voices.length > 1) {
      log?.warn({ model: model.name, voices: shape.voices.length }, 'the graph takes no speaker_id: every voice speaks as its one speaker');
    }
    return new VitsSpeechModel(model.name, layout, shape, tokenizer, network, settings, t, speakerInput);
  });
}

class VitsSpeechModel extends OnnxModel {
  readonly capabilities: readonly ModelCapability[] = ['speech'];
  readonly speech: SpeechOutput;

  constructor(
    name: string,
    layout: OnnxLayout,
    private readonly shape: SpeechShape,
    tokenizer: Tokenizer,
    private readonly network: Network,
    settings: EncoderSettings,
    private readonly t: Transformers,
    private readonly speakerInput: boolean,
  ) {
    super(name, layout, tokenizer, network, settings);
    this.speech = { voices: shape.voices };
  }

  async synthesize(params: SynthesizeParams, signal: AbortSignal): Promise<SynthesizeResult> {
    this.checkLoaded();
    signal.throwIfAborted();
    const speaker = this.shape.voices.indexOf(params.voice);
    if (speaker < 0) throw Errors.badRequest(`voice "${params.voice}" is not one of ${this.shape.voices.join(', ')}`, { param: 'voice' });
    return this.exclusive(async () => {
      signal.throwIfAborted();
      return this.#forward(params.text, speaker);
    });
  }

  /** One pass over a sentence: its waveform and the tokens read. */
  async #forward(text: string, speaker: number): Promise<SynthesizeResult> {
    let waveform: Tensor | undefined;
    let tokens = 0;
    try {
      const inputs = this.tokenizer(text) as unknown as Record<string, Tensor>;
      tokens = inputs['input_ids']?.dims.at(-1) ?? 0;
      // Nothing the vocabulary holds (emoji, another script): silence, not a failed pass.
      if (tokens === 0) return { samples: new Float32Array(0), sampleRate: this.shape.sampleRate, tokens };
      const feeds: Record<string, Tensor> = { ...inputs };
      if (this.speakerInput) feeds[SPEAKER_INPUT] = new this.t.Tensor('int64', BigInt64Array.of(BigInt(speaker)), [1]);
      waveform = ((await this.network(feeds)) as Record<string, Tensor | undefined>)['waveform'];
    } catch (err) {
      throw Errors.engineFailed(`model "${this.name}" failed: ${describeError(err, this.layout.dir)}`, { cause: err });
    }
    if (!waveform || waveform.dims.length !== 2) throw Errors.engineFailed(`model "${this.name}" does not output a waveform [batch, samples]`);
    const data = (waveform.type === 'float32' ? waveform : waveform.to('float32')).data as Float32Array;
    // A copy of its own: the tensor's buffer belongs to onnxruntime.
    return { samples: data.slice(0, waveform.dims[1]), sampleRate: this.shape.sampleRate, tokens };
  }
}

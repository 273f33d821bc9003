/**
 * Route schemas compiled on their first use instead of at start. Fastify compiles every route's
 * validator (Ajv) and serializer (fast-json-stringify) while the app becomes ready; for the
 * request schemas of the inference APIs that is a fifth of the start (bench/results/2026-11-27-code-notes.md), for routes a given
 * appliance may never serve. The compilers are Fastify's own
 * (`@fastify/ajv-compiler`, `@fastify/fast-json-stringify-compiler`) with the same options; only
 * the moment changes: the first request of each route pays its compile.
 *
 * @module
 */
import AjvCompiler from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/** A validator that compiles on its first call and exposes the compiled one's `errors`, as Fastify reads them. */
function lazyValidator(compile: () => (data: unknown) => unknown): (data: unknown) => unknown {
  let compiled: (((data: unknown) => unknown) & { errors?: unknown }) | undefined;
  const validate = (data: unknown): unknown => {
    compiled ??= compile();
    const result = compiled(data);
    validate.errors = compiled.errors;
    return result;
  };
  validate.errors = undefined as unknown;
  return validate;
}

function lazySerializer(compile: () => (data: unknown) => string): (data: unknown) => string {
  let compiled: ((data: unknown) => string) | undefined;
  return (data) => (compiled ??= compile())(data);
}

/** Fastify's `schemaController.compilersFactory`, deferring each compile to the route's first use. */
export function lazyCompilers(): CompilersFactory {
  const validators = AjvCompiler() as unknown as (...args: unknown[]) => (route: unknown) => (data: unknown) => unknown;
  const serializers = SerializerSelector() as unknown as (...args: unknown[]) => (route: unknown) => (data: unknown) => string;
  return {
    buildValidator: ((...args: unknown[]) => {
      const compiler = validators(...args);
      return (route: unknown) => lazyValidator(() => compiler(route));
    }) as unknown as CompilersFactory['buildValidator'],
    buildSerializer: (...args: unknown[]) => {
      const compiler = serializers(...args);
      return (route: unknown) => lazySerializer(() => compiler(route));
    },
  };
}

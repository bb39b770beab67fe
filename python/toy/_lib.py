"""The C library through ctypes: finding libtoy.so, and toy.h's structs and functions.

Each struct mirrors its declaration in include/toy.h field for field. The ones that begin
with `size` are initialised by the library's *_params_init with ctypes.sizeof, so the
library reads only what this file knows of (toy.h: versions and the ABI).
"""

import ctypes
import ctypes.util
import os

c_int32_p = ctypes.POINTER(ctypes.c_int32)

SUPPORTED_MAJOR = 3


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    # a library the user names wins (a debug build, say), and is the only one tried
    env = os.environ.get("TOY_LIBRARY")
    if env:
        yield env
        return
    # the copy a wheel bundles beside this file (python/toy_build.py puts it there)
    yield os.path.join(here, f"libtoy.so.{SUPPORTED_MAJOR}")
    # the source tree: python/toy/ beside build/
    yield os.path.normpath(os.path.join(here, "..", "..", "build", f"libtoy.so.{SUPPORTED_MAJOR}"))
    found = ctypes.util.find_library("toy")
    if found:
        yield found
    yield f"libtoy.so.{SUPPORTED_MAJOR}"
    for prefix in ("/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu"):
        yield os.path.join(prefix, f"libtoy.so.{SUPPORTED_MAJOR}")


def load_library():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        _declare(lib)
        major = ctypes.c_int()
        lib.toy_version(ctypes.byref(major), None, None)
        if major.value != SUPPORTED_MAJOR:
            tried.append(f"{path} (version {major.value}, these bindings need {SUPPORTED_MAJOR})")
            continue
        return lib
    raise OSError(f"libtoy.so.{SUPPORTED_MAJOR} not found; install toy with pip (its wheel bundles "
                  "the library), or `make install`, or run `make` in the source tree, or set TOY_LIBRARY to "
                  "its path. Tried: " + "; ".join(tried))


class ModelParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("use_mmap", ctypes.c_bool), ("split", ctypes.POINTER(ctypes.c_int32)),
                ("n_split", ctypes.c_int32)]


TRACE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float),
                            ctypes.c_int64, ctypes.c_int64)


class ContextParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("n_ctx", ctypes.c_int32), ("n_batch", ctypes.c_int32),
                ("n_seq_max", ctypes.c_int32), ("n_outputs", ctypes.c_int32), ("n_threads", ctypes.c_int32),
                ("cache_type_k", ctypes.c_int), ("cache_type_v", ctypes.c_int),
                ("honor_sliding_window", ctypes.c_bool), ("trace", TRACE_FN), ("trace_user", ctypes.c_void_p),
                ("embeddings", ctypes.c_bool)]


class LogitBias(ctypes.Structure):
    _fields_ = [("token", ctypes.c_int32), ("bias", ctypes.c_float)]


class SamplerParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float),
                ("repeat_last_n", ctypes.c_int32), ("frequency_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float), ("seed", ctypes.c_uint64), ("grammar", ctypes.c_void_p),
                ("logit_bias", ctypes.POINTER(LogitBias)), ("n_logit_bias", ctypes.c_size_t)]


class Batch(ctypes.Structure):
    _fields_ = [("n_tokens", ctypes.c_int32), ("token", c_int32_p), ("pos", c_int32_p), ("seq_id", c_int32_p),
                ("logits", ctypes.POINTER(ctypes.c_int8))]


TEXT_FN = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_char),
                           ctypes.c_size_t)


class GenerateParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("max_tokens", ctypes.c_int32),
                ("stops", ctypes.POINTER(ctypes.c_char_p)), ("n_stops", ctypes.c_size_t),
                ("context_shift", ctypes.c_bool), ("n_keep", ctypes.c_int32), ("on_text", TEXT_FN),
                ("user", ctypes.c_void_p), ("feed_last", ctypes.c_bool)]


class GenerateResult(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("finish", ctypes.c_int), ("n_prompt", ctypes.c_int32),
                ("n_generated", ctypes.c_int32), ("n_discarded", ctypes.c_int32),
                ("prompt_seconds", ctypes.c_double), ("gen_seconds", ctypes.c_double)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


INIT_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p,
                                    ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t)


class InitParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("arch", ctypes.c_char_p), ("preset", ctypes.c_char_p),
                ("n_embd", ctypes.c_int32), ("n_layer", ctypes.c_int32), ("n_head", ctypes.c_int32),
                ("n_head_kv", ctypes.c_int32), ("n_ff", ctypes.c_int32), ("n_ctx", ctypes.c_int32),
                ("tied", ctypes.c_int), ("name", ctypes.c_char_p), ("vocab_path", ctypes.c_char_p),
                ("ftype", ctypes.c_int), ("seed", ctypes.c_uint64), ("n_threads", ctypes.c_int),
                ("progress", INIT_PROGRESS_FN), ("progress_user", ctypes.c_void_p)]


class TrainProgress(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int64), ("n_steps", ctypes.c_int64), ("epoch", ctypes.c_int64),
                ("loss", ctypes.c_double), ("lr", ctypes.c_double), ("grad_norm", ctypes.c_double),
                ("tokens_per_s", ctypes.c_double), ("elapsed_s", ctypes.c_double), ("eta_s", ctypes.c_double),
                ("has_eval", ctypes.c_bool), ("eval_loss", ctypes.c_double), ("eval_ppl", ctypes.c_double),
                ("saved", ctypes.c_bool)]


TRAIN_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(TrainProgress))


class TrainParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("model_path", ctypes.c_char_p), ("init", ctypes.POINTER(InitParams)),
                ("data", ctypes.POINTER(ctypes.c_char_p)), ("n_data", ctypes.c_int),
                ("eval_data", ctypes.POINTER(ctypes.c_char_p)), ("n_eval_data", ctypes.c_int),
                ("eval_every", ctypes.c_int64), ("batch", ctypes.c_int32), ("seq", ctypes.c_int32),
                ("grad_accum", ctypes.c_int32), ("steps", ctypes.c_int64), ("epochs", ctypes.c_int32),
                ("lr", ctypes.c_float), ("min_lr", ctypes.c_float), ("warmup", ctypes.c_int64),
                ("weight_decay", ctypes.c_float), ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
                ("eps", ctypes.c_float), ("clip", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("n_threads", ctypes.c_int), ("out_path", ctypes.c_char_p), ("out_ftype", ctypes.c_int),
                ("save_every", ctypes.c_int64), ("resume", ctypes.c_bool), ("lora_rank", ctypes.c_int32),
                ("lora_alpha", ctypes.c_float), ("lora_targets", ctypes.c_uint32), ("lora_dropout", ctypes.c_float),
                ("compute_type", ctypes.c_int), ("progress", TRAIN_PROGRESS_FN), ("progress_user", ctypes.c_void_p),
                ("stop", ctypes.c_void_p), ("no_mmap", ctypes.c_bool), ("lora_per_head", ctypes.c_bool),
                ("lora_init_scale", ctypes.c_float), ("lora_from", ctypes.c_char_p)]


class TrainerParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("batch", ctypes.c_int32), ("seq", ctypes.c_int32), ("lr", ctypes.c_float),
                ("weight_decay", ctypes.c_float), ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
                ("eps", ctypes.c_float), ("clip", ctypes.c_float), ("compute_type", ctypes.c_int),
                ("lora_rank", ctypes.c_int32), ("lora_alpha", ctypes.c_float), ("lora_targets", ctypes.c_uint32),
                ("lora_per_head", ctypes.c_bool), ("lora_init_scale", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("taps", ctypes.c_char_p), ("n_threads", ctypes.c_int)]


class TrainResult(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("steps", ctypes.c_int64), ("n_params", ctypes.c_int64),
                ("n_train_tokens", ctypes.c_int64), ("n_eval_tokens", ctypes.c_int64), ("loss", ctypes.c_double),
                ("eval_loss", ctypes.c_double), ("stopped", ctypes.c_bool), ("rank", ctypes.c_int),
                ("n_procs", ctypes.c_int)]


def _declare(lib):
    """Argument and result types of the functions the bindings call."""
    P, I, SZ, B = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_bool
    S, I32 = ctypes.c_char_p, ctypes.c_int32
    PP = ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "toy_version": (I, [ctypes.POINTER(I), ctypes.POINTER(I), ctypes.POINTER(I)]),
        "toy_last_error": (S, []),
        "toy_kernel_isa": (S, []),
        "toy_free": (None, [P]),
        "toy_model_params_init": (None, [ctypes.POINTER(ModelParams), SZ]),
        "toy_model_load_with": (I, [S, ctypes.POINTER(ModelParams), PP]),
        "toy_model_free": (None, [P]),
        "toy_model_vocab": (P, [P]),
        "toy_model_gguf": (P, [P]),
        "toy_model_n_vocab": (I32, [P]),
        "toy_model_n_ctx_train": (I32, [P]),
        "toy_model_n_embd": (I32, [P]),
        "toy_model_n_layer": (I32, [P]),
        "toy_context_params_init": (None, [ctypes.POINTER(ContextParams), SZ]),
        "toy_context_new": (I, [P, ctypes.POINTER(ContextParams), PP]),
        "toy_context_free": (None, [P]),
        "toy_n_ctx": (I32, [P]),
        "toy_decode": (I, [P, ctypes.POINTER(Batch)]),
        "toy_get_logits": (ctypes.POINTER(ctypes.c_float), [P, I32]),
        "toy_get_embeddings": (ctypes.POINTER(ctypes.c_float), [P, I32]),
        "toy_model_pooling": (I, [P]),
        "toy_kv_seq_rm": (I, [P, I32, I32, I32]),
        "toy_sampler_params_init": (None, [ctypes.POINTER(SamplerParams), SZ]),
        "toy_sampler_new": (I, [ctypes.POINTER(SamplerParams), I32, PP]),
        "toy_sampler_free": (None, [P]),
        "toy_grammar_new": (I, [P, S, PP]),
        "toy_grammar_from_json_schema": (I, [P, S, B, PP]),
        "toy_grammar_free": (None, [P]),
        "toy_tokenize_alloc": (I, [P, S, SZ, B, B, ctypes.POINTER(c_int32_p), c_int32_p]),
        "toy_detokenize": (I, [P, c_int32_p, I32, B, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(SZ)]),
        "toy_generate_params_init": (None, [ctypes.POINTER(GenerateParams), SZ]),
        "toy_generate": (I, [P, P, c_int32_p, I32, ctypes.POINTER(GenerateParams), ctypes.POINTER(GenerateResult)]),
        "toy_chat_template_of": (I, [P, ctypes.POINTER(S)]),
        "toy_chat_apply": (I, [S, ctypes.POINTER(ChatMessage), SZ, B, ctypes.POINTER(ctypes.c_void_p)]),
        "toy_chat_template_new": (I, [S, S, S, PP]),
        "toy_chat_template_builtin": (I, [S, PP]),
        "toy_chat_template_family": (S, [P]),
        "toy_model_chat_template": (I, [P, S, PP]),
        "toy_chat_template_render": (I, [P, S, S, S, B, ctypes.POINTER(ctypes.c_void_p)]),
        "toy_chat_template_reads": (B, [P, S]),
        "toy_chat_template_bos": (S, [P]),
        "toy_chat_template_prompt": (I, [P, S, S, S, B, ctypes.POINTER(ctypes.c_void_p)]),
        "toy_chat_template_parse": (I, [P, S, S, S, B, ctypes.POINTER(ctypes.c_void_p)]),
        "toy_chat_template_parse_partial": (I, [P, S, S, S, B, ctypes.POINTER(ctypes.c_void_p)]),
        "toy_chat_template_tool_grammar": (I, [P, S, S, S, B, ctypes.POINTER(ctypes.c_void_p)]),
        "toy_chat_template_free": (None, [P]),
        "toy_ftype_from_name": (I, [S]),
        "toy_type_from_name": (I, [S]),
        "toy_init_params_init": (None, [ctypes.POINTER(InitParams), SZ]),
        "toy_train_params_init": (None, [ctypes.POINTER(TrainParams), SZ]),
        "toy_train": (I, [ctypes.POINTER(TrainParams), ctypes.POINTER(TrainResult)]),
        "toy_model_new": (I, [ctypes.POINTER(InitParams), PP]),
        "toy_model_save": (I, [P, S]),
        "toy_trainer_params_init": (None, [ctypes.POINTER(TrainerParams), SZ]),
        "toy_trainer_new": (I, [P, ctypes.POINTER(TrainerParams), PP]),
        "toy_trainer_free": (None, [P]),
        "toy_trainer_step": (I, [P, c_int32_p, I32, I32, B, ctypes.POINTER(ctypes.c_double)]),
        "toy_trainer_set_lr": (None, [P, ctypes.c_float]),
        "toy_trainer_n_steps": (ctypes.c_int64, [P]),
        "toy_trainer_n_tensors": (I, [P]),
        "toy_trainer_tensor_name": (S, [P, I]),
        "toy_trainer_param": (ctypes.POINTER(ctypes.c_float), [P, S, ctypes.POINTER(ctypes.c_int64)]),
        "toy_trainer_grad": (ctypes.POINTER(ctypes.c_float), [P, S, ctypes.POINTER(ctypes.c_int64)]),
        "toy_trainer_tap": (ctypes.POINTER(ctypes.c_float), [P, S, ctypes.POINTER(ctypes.c_int64),
                                                             ctypes.POINTER(ctypes.c_int64)]),
        "toy_trainer_save": (I, [P, S, I]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args

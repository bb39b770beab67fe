/* main.c — the toy command: dispatches to a subcommand (the helpers the subcommands
 * share are in options.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "toy.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"info", cmd_info, "describe a GGUF file: architecture, hyperparameters, tokenizer, tensors"},
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "talk with a model interactively"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"tokenizer", cmd_tokenizer, "train a byte-level BPE tokenizer on plain text"},
    {"eval", cmd_eval, "write the logits of every position of a token sequence"},
    {"perplexity", cmd_perplexity, "measure a model's perplexity over a text file, as llama.cpp does"},
    {"quantize", cmd_quantize, "convert a GGUF model to another weight type or mix"},
    {"convert", cmd_convert, "write a model's Q, K and V per head (toy's design) or as llama.cpp does"},
    {"init", cmd_init, "write a random-weight model of a real shape"},
    {"bench", cmd_bench, "measure prompt and generation speed against the memory roofline"},
    {"serve", cmd_serve, "serve a model over HTTP with OpenAI's API, and a chat page"},
    {"grad", cmd_grad, "write the loss of a token sequence and the gradient of every weight"},
    {"train", cmd_train, "train a model from scratch (or further) on text or chat data"},
    {"finetune", cmd_finetune, "fine-tune a model (every weight, or LoRA adapters) on text or chat data"},
    {"lora", cmd_lora, "merge LoRA adapters into a model"},
    {"cka", cmd_cka, "compare two models layer by layer (linear CKA of their residual streams)"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: toy COMMAND [OPTIONS]\n"
            "\n"
            "toy runs and trains llama-family language models stored as GGUF files.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "`toy COMMAND --help` describes a command's options.\n"
            "  -h, --help     this message\n"
            "  --version      print the version\n");
}

/* A memory-mapped file that another program truncates faults on the pages it lost: an
 * error naming the file instead of a crash (the library maps, the command handles). */
static void on_bus_error(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    static const char head[] = "toy: ", tail[] = ": the file changed while toy read it (it is memory-mapped: "
                                               "--no-mmap reads it into memory instead)\n",
                      unknown[] = "toy: bus error: a memory-mapped file was truncated while toy read it\n";
    const char *path = toy_gguf_mapped_file(si->si_addr);
    if (path) {
        ssize_t w = write(STDERR_FILENO, head, sizeof head - 1);
        w = write(STDERR_FILENO, path, strlen(path));
        w = write(STDERR_FILENO, tail, sizeof tail - 1);
        (void)w;
    } else {
        ssize_t w = write(STDERR_FILENO, unknown, sizeof unknown - 1);
        (void)w;
    }
    _exit(1);
}

int main(int argc, char **argv) {
    struct sigaction bus = {.sa_sigaction = on_bus_error, .sa_flags = SA_SIGINFO};
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        if (toy_kernel_init()) {
            fprintf(stderr, "toy: %s\n", toy_last_error());
            return 1;
        }
        int major, minor, patch;
        toy_version(&major, &minor, &patch);
        printf("toy %d.%d.%d (kernels: %s; bf16 dot: %s; mpirun: %s)\n", major, minor, patch, toy_kernel_isa(),
               toy_kernel_bf16_dot(), toy_have_mpi() ? "yes" : "no, built without MPI");
        return 0;
    }
    /* under mpirun, the commands that run a model split it into a pipeline of stages:
     * rank 0 runs the command, the others serve its stages until it exits */
    static const char *const pipelined[] = {"run", "chat", "eval", "perplexity", "serve", "bench"};
    for (size_t i = 0; i < sizeof pipelined / sizeof *pipelined; i++) {
        int rank, size;
        if (strcmp(cmd, pipelined[i])) continue;
        if (toy_pipeline_init(&rank, &size)) {
            fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
            return 1;
        }
        if (rank > 0) {
            if (toy_pipeline_worker() == TOY_OK) return 0;
            fprintf(stderr, "toy %s: rank %d: %s\n", cmd, rank, toy_last_error());
            return 1;
        }
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(cmd, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "toy: unknown command '%s' (see toy --help)\n", cmd);
    return 2;
}

/* A module for unwind_test, built twice (unwind_module_a, unwind_module_b) with a different
 * UNWIND_FRAME: the same code at the same offsets, only the size of call_through's frame (and so
 * its CFI) differs. Loaded one after the other at the same address, a return address into
 * call_through is the same number in both with a different frame rule: a rule cached for the
 * first module must not be used for the second.
 * Written in assembly so that the layout does not depend on the compiler. */
#if defined(__x86_64__)
#define STR2(x) #x
#define STR(x) STR2(x)
/* int call_through(int (*fn)(void*), void* arg): calls fn(arg) from a frame of UNWIND_FRAME + 16
 * bytes, which it fills with a poison value first (a walk that reads a wrong slot finds no return
 * address there). */
__asm__(
    ".text\n"
    ".globl call_through\n"
    ".type call_through, @function\n"
    "call_through:\n"
    ".cfi_startproc\n"
    "  push %rbx\n"
    ".cfi_def_cfa_offset 16\n"
    ".cfi_offset rbx, -16\n"
    "  sub $" STR(UNWIND_FRAME) ", %rsp\n"
    ".cfi_def_cfa_offset " STR(UNWIND_FRAME) " + 16\n"
    "  mov %rdi, %rbx\n"
    "  mov $(" STR(UNWIND_FRAME) " >> 3), %ecx\n"
    "  mov $0x5a5a5a5a5a5a5a5a, %rax\n"
    "1:\n"
    "  mov %rax, -8(%rsp,%rcx,8)\n"
    "  dec %ecx\n"
    "  jnz 1b\n"
    "  mov %rsi, %rdi\n"
    "  call *%rbx\n"
    "  add $1, %eax\n"
    "  add $" STR(UNWIND_FRAME) ", %rsp\n"
    ".cfi_def_cfa_offset 16\n"
    "  pop %rbx\n"
    ".cfi_def_cfa_offset 8\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size call_through, .-call_through\n");
#endif

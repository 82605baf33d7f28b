# sap's plain `fib` (no inlining) as Cranelift 0.135 emits it (`SAP_JIT_DUMP`, the plain
# twin of `fib`), with the failure paths folded into one return: 44 instructions per
# call -- callee-saved registers stored to stack slots, copies around each `lea` and the
# sum, `seto`/`test`/`jne` for the overflow, 32-bit branch displacements and immediates.
    .text
    .globl fib_cranelift
    .p2align 4
fib_cranelift:
    push %rbp
    mov %rsp,%rbp
    sub $0x20,%rsp
    mov %rbx,(%rsp)
    mov %r12,0x8(%rsp)
    mov %r13,0x10(%rsp)
    test %rdi,%rdi
    mov %rdi,%r13
    .byte 0x0f,0x84; .long 9f-.-4
    cmp $2,%rsi
    mov %rsi,%r12
    .byte 0x0f,0x8c; .long 8f-.-4
    mov %r13,%rax
    lea -1(%rax),%rdi
    mov %r12,%rax
    lea -1(%rax),%rsi
    call fib_cranelift
    mov %rax,%rbx
    test %rdx,%rdx
    .byte 0x0f,0x85; .long 9f-.-4
    mov %r13,%rdi
    .byte 0x48,0x81,0xc7; .long -1
    mov %r12,%rsi
    .byte 0x48,0x81,0xc6; .long -2
    call fib_cranelift
    test %rdx,%rdx
    .byte 0x0f,0x85; .long 9f-.-4
    mov %rbx,%rcx
    mov %rcx,%rdx
    add %rax,%rdx
    mov %rax,%rcx
    mov %rdx,%rax
    seto %dl
    test %dl,%dl
    .byte 0x0f,0x85; .long 9f-.-4
    .byte 0xe9; .long 7f-.-4
8:  mov %r12,%rsi
    mov %rsi,%rax
7:  xor %rdx,%rdx
    mov (%rsp),%rbx
    mov 0x8(%rsp),%r12
    mov 0x10(%rsp),%r13
    add $0x20,%rsp
    mov %rbp,%rsp
    pop %rbp
    ret
9:  mov $1,%edx
    mov (%rsp),%rbx
    mov 0x8(%rsp),%r12
    mov 0x10(%rsp),%r13
    add $0x20,%rsp
    mov %rbp,%rsp
    pop %rbp
    ret
    .section .note.GNU-stack,"",@progbits

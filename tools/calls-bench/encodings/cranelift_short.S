# `cranelift.S` with the same instructions in their shortest encodings: 8-bit branch
# displacements and immediates (the assembler's choice). Only the bytes differ.
    .text
    .globl fib_cranelift_short
    .p2align 4
fib_cranelift_short:
    push %rbp
    mov %rsp,%rbp
    sub $0x20,%rsp
    mov %rbx,(%rsp)
    mov %r12,0x8(%rsp)
    mov %r13,0x10(%rsp)
    test %rdi,%rdi
    mov %rdi,%r13
    je 9f
    cmp $2,%rsi
    mov %rsi,%r12
    jl 8f
    mov %r13,%rax
    lea -1(%rax),%rdi
    mov %r12,%rax
    lea -1(%rax),%rsi
    call fib_cranelift_short
    mov %rax,%rbx
    test %rdx,%rdx
    jne 9f
    mov %r13,%rdi
    add $-1,%rdi
    mov %r12,%rsi
    add $-2,%rsi
    call fib_cranelift_short
    test %rdx,%rdx
    jne 9f
    mov %rbx,%rcx
    mov %rcx,%rdx
    add %rax,%rdx
    mov %rax,%rcx
    mov %rdx,%rax
    seto %dl
    test %dl,%dl
    jne 9f
    jmp 7f
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
